import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chainSeed, MessageChain, messageKey, splitKeys } from "./message-keys.ts";
import { RolloutThreads } from "./threads.ts";

const toolCall = (args: string) => [{ id: "call_1", type: "function", function: { name: "read", arguments: args } }];

describe("message keys", () => {
  test("the known re-serializations of an answer keep its key", () => {
    const sampled = messageKey({
      role: "assistant",
      content: "\n\n",
      reasoning_content: "Think.",
      tool_calls: toolCall('{"path": "a"}'),
    });
    // Qwen Code / OpenCode echo the whitespace; others drop it with the reasoning and re-serialize the arguments.
    assert.equal(messageKey({ role: "assistant", content: "", tool_calls: toolCall('{"path":"a"}') }), sampled);
    assert.equal(messageKey({ role: "assistant", content: null, tool_calls: toolCall('{ "path" : "a" }') }), sampled);
    const text = messageKey({ role: "assistant", content: "Done.\n" });
    assert.equal(messageKey({ role: "assistant", content: [{ type: "text", text: "Done." }] }), text);
  });

  test("a changed answer, another tool-call id or other tool output is another key", () => {
    const base = messageKey({ role: "assistant", content: "", tool_calls: toolCall('{"path": "a"}') });
    assert.notEqual(messageKey({ role: "assistant", content: "", tool_calls: toolCall('{"path": "b"}') }), base);
    assert.notEqual(
      messageKey({
        role: "assistant",
        content: "",
        tool_calls: [{ id: "call_2", function: { name: "read", arguments: '{"path": "a"}' } }],
      }),
      base,
    );
    assert.notEqual(messageKey({ role: "assistant", content: "Sure.", tool_calls: toolCall('{"path": "a"}') }), base);
    assert.notEqual(
      messageKey({ role: "tool", tool_call_id: "call_1", content: "x" }),
      messageKey({ role: "tool", tool_call_id: "call_1", content: "y" }),
    );
  });

  test("the loose chain knows a changed tool-call turn by its ids, and nothing else by less than the strict key", () => {
    const user = { role: "user", content: "go" };
    const sampled = { role: "assistant", content: "\n\n", tool_calls: toolCall('{"path": "a", "limit": 1}') };
    const answer = splitKeys(new MessageChain(chainSeed("m", null), [user]).extendedBy(sampled));
    // OpenCode-style: the same ids, the arguments written back in another key order and the text dropped.
    const echoed = { role: "assistant", content: null, tool_calls: toolCall('{"limit":1,"path":"a"}') };
    const later = new MessageChain(chainSeed("m", null), [user, echoed]);
    assert.notEqual(later.at(2), answer.strict);
    assert.equal(later.looseAt(2), answer.loose);
    // Without ids, or with other ids, a turn is its strict parts in the loose chain too.
    const noIds = { role: "assistant", content: "", tool_calls: [{ function: { name: "read", arguments: "{}" } }] };
    const noIdKeys = splitKeys(new MessageChain(chainSeed("m", null), [user]).extendedBy(noIds));
    const changed = { ...noIds, tool_calls: [{ function: { name: "read", arguments: '{"x":1}' } }] };
    assert.notEqual(new MessageChain(chainSeed("m", null), [user, changed]).looseAt(2), noIdKeys.loose);
    const otherId = { ...sampled, tool_calls: [{ ...toolCall("{}")[0], id: "call_9" }] };
    assert.notEqual(new MessageChain(chainSeed("m", null), [user, otherId]).looseAt(2), answer.loose);
  });

  test("the chain keys prefixes, under a seed of model and tools", () => {
    const messages = [
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
      { role: "user", content: "c" },
    ];
    const chain = new MessageChain(chainSeed("m", null), messages);
    const earlier = new MessageChain(chainSeed("m", null), messages.slice(0, 1));
    assert.equal(splitKeys(earlier.extendedBy({ role: "assistant", content: "b\n" })).strict, chain.at(2));
    assert.notEqual(new MessageChain(chainSeed("m", [{ type: "function" }]), messages).at(2), chain.at(2));
    assert.equal(chain.length, 3);
  });

  test("a thread continues from the sampled ids when the harness echoes an answer's tool-call ids but rewrote it", () => {
    const threads = new RolloutThreads();
    const user = { role: "user", content: "go" };
    const sampled = { role: "assistant", content: "\n\n", tool_calls: toolCall('{"path": "a", "limit": 1}') };
    const chain = new MessageChain(chainSeed("m", null), [user]);
    threads.add({
      seq: 1,
      thread: 1,
      parent: null,
      promptIds: [1, 2],
      choices: [{ tokenIds: [3, 4], key: chain.extendedBy(sampled) }],
    });
    const echoed = { role: "assistant", content: null, tool_calls: toolCall('{"limit":1,"path":"a"}') };
    const later = new MessageChain(chainSeed("m", null), [user, echoed, { role: "tool", tool_call_id: "call_1" }]);
    assert.equal(threads.find(later, 2)?.seq, 1);
    const renamed = { ...echoed, tool_calls: [{ id: "call_2", function: { name: "read", arguments: "{}" } }] };
    assert.equal(threads.find(new MessageChain(chainSeed("m", null), [user, renamed]), 2), undefined);
  });

  test("a tool-call id is known as OpenClaw echoes it: letters and digits cut to 40 (chat), a suffix of its own (Responses)", () => {
    const withId = (id: string) => ({
      role: "assistant",
      content: null,
      tool_calls: [{ id, type: "function", function: { name: "exec", arguments: "{}" } }],
    });
    const sampled = messageKey(withId("chatcmpl-tool-c1e88867a3934934b20c38f76900aaaa"));
    assert.equal(messageKey(withId("chatcmpltoolc1e88867a3934934b20c38f76900")), sampled);
    assert.equal(messageKey(withId("call_chatcmpl-tool-c1e88867a3934934b20c38f76900aaaa_f_3c0d77db6a")), sampled);
    assert.notEqual(messageKey(withId("chatcmpl-tool-d1e88867a3934934b20c38f76900aaaa")), sampled);
    assert.notEqual(messageKey(withId("call_1")), messageKey(withId("call_2")));
  });
});
