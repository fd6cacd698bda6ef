// HistoryRepair on a real store: which assistant message is matched to which recorded turn (tool-call ids, then
// content in the order turns were sampled), what is left alone, and that a gateway restarted on the same store
// repairs the same way.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, test } from "node:test";
import type { CallRecord } from "../../store/records.ts";
import { Store } from "../../store/store.ts";
import { testCallRecord, testRolloutRecord } from "../../store/test-support.ts";
import { tempDir } from "../../test/helpers.ts";
import type { Json } from "../upstream/fields.ts";
import { HistoryRepair } from "./index.ts";

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function openStore(dir?: string): { store: Store; dir: string } {
  const path = dir ?? tempDir("repair");
  if (!dir) dirs.push(path);
  return { store: new Store({ path }), dir: path };
}

/** A recorded chat call of rollout "r" whose upstream answered `message`. */
function recorded(seq: number, message: Json, prompt = [1, 2, 3]): CallRecord {
  return testCallRecord({
    seq,
    rolloutId: "r",
    promptTokenIds: prompt,
    choices: [{ index: 0, tokenIds: [9], logprobs: [-0.1], finishReason: "stop" }],
    response: { choices: [{ index: 0, message: { role: "assistant", ...message } }] },
  });
}

const read = (id: string, path: string) => ({
  id,
  type: "function",
  function: { name: "read_file", arguments: JSON.stringify({ path }) },
});

async function putAll(store: Store, calls: CallRecord[]): Promise<void> {
  await store.putRollout(testRolloutRecord({ id: "r", key: "k", createdAt: 0 }));
  for (const call of calls) await store.putCall(call);
}

describe("history repair", () => {
  test('by tool-call id: vLLM\'s "\\n\\n" before a tool call becomes ""; the request is a new object, the harness\'s untouched', async () => {
    const { store } = openStore();
    await putAll(store, [
      recorded(1, { reasoning_content: "\nRead.\n", content: "\n\n", tool_calls: [read("call_a", "a.py")] }),
    ]);
    const repair = new HistoryRepair(store);
    const sent = {
      role: "assistant",
      content: "\n\n",
      reasoning: "\nRead.\n",
      tool_calls: [read("call_a", "a.py")],
    };
    const body = {
      messages: [{ role: "user", content: "go" }, sent, { role: "tool", tool_call_id: "call_a", content: "x" }],
    };
    const { forwarded, repairs } = repair.repair("r", body);
    assert.deepEqual(repairs, [{ turn: 1, kind: "content", callSeq: 1 }]);
    assert.equal((forwarded["messages"] as Json[])[1]!["content"], "");
    assert.equal(sent.content, "\n\n", "the harness's message is not edited in place");
    assert.equal(
      (forwarded["messages"] as Json[])[2],
      body.messages[2],
      "other messages are the harness's own objects",
    );
    await store.close();
  });

  test("nothing to repair: the very same body comes back (its bytes are forwarded as received)", async () => {
    const { store } = openStore();
    await putAll(store, [
      recorded(1, { reasoning_content: "\nRead.\n", content: "\n\n", tool_calls: [read("call_a", "a.py")] }),
    ]);
    const repair = new HistoryRepair(store);
    const faithful = {
      messages: [
        { role: "user", content: "go" },
        { role: "assistant", content: "", reasoning: "Read.", tool_calls: [read("call_a", "a.py")] },
      ],
    };
    assert.equal(repair.repair("r", faithful).forwarded, faithful);
    const noHistory = { messages: [{ role: "user", content: "go" }] };
    assert.equal(repair.repair("r", noHistory).forwarded, noHistory);
    const unknown = {
      messages: [
        { role: "assistant", content: "\n\nSomething the model never said.\n", tool_calls: [read("call_z", "z.py")] },
      ],
    };
    assert.deepEqual(repair.repair("r", unknown), { forwarded: unknown, repairs: [] });
    assert.deepEqual(repair.repair(null, unknown).repairs, [], "unattributed calls are not repaired");
    await store.close();
  });

  test("by content, in the order turns were sampled; dropped reasoning is put back, re-spelled arguments are left (the template writes them alike)", async () => {
    const { store, dir } = openStore();
    await putAll(store, [
      recorded(1, { reasoning_content: "\nFirst.\n", content: "\n\nOk." }),
      recorded(2, { reasoning_content: "\nSecond.\n", content: "\n\nOk." }),
      recorded(3, { reasoning_content: "\nThird.\n", content: "\n\nReading.\n", tool_calls: [read("call_1", "b.py")] }),
    ]);
    // A harness that trims content, drops reasoning, gives its own tool-call ids and re-orders argument keys.
    const body = {
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: "Ok." },
        { role: "user", content: "again" },
        { role: "assistant", content: "Ok." },
        { role: "user", content: "read b" },
        {
          role: "assistant",
          content: "Reading.",
          tool_calls: [
            { id: "mine_1", type: "function", function: { name: "read_file", arguments: '{ "path" : "b.py" }' } },
          ],
        },
      ],
    };
    const first = new HistoryRepair(store).repair("r", body);
    const out = first.forwarded["messages"] as Json[];
    // Under both names: vLLM >= 0.17 reads `reasoning`, SGLang and older vLLM `reasoning_content`.
    for (const key of ["reasoning", "reasoning_content"])
      assert.deepEqual([out[1]![key], out[3]![key], out[5]![key]], ["\nFirst.\n", "\nSecond.\n", "\nThird.\n"]);
    assert.equal(out[5]!["content"], "Reading.");
    assert.equal(out[5]!["tool_calls"], body.messages[5]!.tool_calls, "the harness's own ids and spelling");
    assert.deepEqual(
      first.repairs.map((r) => [r.turn, r.kind, r.callSeq]),
      [
        [1, "reasoning", 1],
        [3, "reasoning", 2],
        [5, "reasoning", 3],
      ],
    );
    await store.close();

    // Another gateway on the same store (a restart) reads the turns back and repairs the same way.
    const again = new Store({ path: dir });
    assert.deepEqual(new HistoryRepair(again).repair("r", body), first);
    await again.close();
  });

  test('a thinking-off turn (prompt ending in the empty think block) gets reasoning "\\n"; tool arguments the harness changed are restored', async () => {
    const { store } = openStore();
    const emptyThink = [151644, 77091, 198, 151667, 271, 151668, 271];
    await putAll(store, [recorded(1, { content: null, tool_calls: [read("call_a", "a.py")] }, emptyThink)]);
    const repair = new HistoryRepair(store);
    const changed = { ...read("call_a", "a.py"), function: { name: "read_file", arguments: '{"path": "A.PY"}' } };
    const { forwarded, repairs } = repair.repair("r", {
      messages: [{ role: "assistant", content: null, tool_calls: [changed] }],
    });
    const message = (forwarded["messages"] as Json[])[0]!;
    assert.equal(message["reasoning"], "\n");
    assert.equal(message["reasoning_content"], "\n");
    assert.equal(message["content"], "");
    assert.deepEqual((message["tool_calls"] as Json[])[0], {
      ...changed,
      function: { name: "read_file", arguments: '{"path":"a.py"}' },
    });
    assert.deepEqual(
      repairs.map((r) => r.kind),
      ["empty_think", "tool_calls"],
    );
    await store.close();
  });

  test("turns recorded after the first repair are learned as calls finish", async () => {
    const { store } = openStore();
    await putAll(store, [
      recorded(1, { reasoning_content: "\nA.\n", content: "\n\n", tool_calls: [read("call_a", "a.py")] }),
    ]);
    const repair = new HistoryRepair(store);
    repair.repair("r", { messages: [{ role: "assistant", content: "\n\n", tool_calls: [read("call_a", "a.py")] }] });
    const later = recorded(2, { reasoning_content: "\nB.\n", content: "\n\n", tool_calls: [read("call_b", "b.py")] });
    repair.observe(later); // the recorder's hook, before the store is read again
    const { repairs } = repair.repair("r", {
      messages: [{ role: "assistant", content: "\n\n", reasoning: "\nB.\n", tool_calls: [read("call_b", "b.py")] }],
    });
    assert.deepEqual(repairs, [{ turn: 0, kind: "content", callSeq: 2 }]);
    await store.close();
  });

  test("reasoning echoed as reasoning_content, which vLLM >= 0.17 drops, is put back under both names; a server that reads it is left alone", async () => {
    const { store } = openStore();
    await putAll(store, [
      recorded(1, { reasoning: "\nRead.\n", content: "\n\n", tool_calls: [read("call_a", "a.py")] }),
    ]);
    // The AI SDK (OpenCode) sends reasoning back as `reasoning_content`.
    const body = {
      messages: [
        { role: "user", content: "go" },
        { role: "assistant", content: "", reasoning_content: "\nRead.\n", tool_calls: [read("call_a", "a.py")] },
      ],
    };
    const current = new HistoryRepair(store).repair("r", body);
    assert.deepEqual(current.repairs, [{ turn: 1, kind: "reasoning", callSeq: 1 }]);
    assert.equal((current.forwarded["messages"] as Json[])[1]!["reasoning"], "\nRead.\n");
    const legacy = new HistoryRepair(store, { reasoningField: "reasoning_content" }).repair("r", body);
    assert.deepEqual(legacy, { forwarded: body, repairs: [] });
    await store.close();
  });
});
