import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { loadScript, ScriptError, startSim, type SimServer } from "./index.ts";
import { assembleChat, postJson, postSse, READ_TOOL, SHELL_TOOL, type Json } from "./test-helpers.ts";

const tok = qwen3Tokenizer();
const FIXTURE = new URL("./fixtures/two-step.json", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "rlgate-sim-script-"));

function writeJson(name: string, value: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, typeof value === "string" ? value : JSON.stringify(value));
  return path;
}

describe("loadScript", () => {
  test("reads {turns: [...]} and a bare array alike", () => {
    const turns = loadScript(FIXTURE);
    assert.equal(turns.length, 3);
    assert.deepEqual(turns[0]!.tool_calls, [{ name: "bash", arguments: { command: "ls -la" } }]);
    assert.equal(turns[1]!.tool_calls![1]!.arguments, '{"path":"b.txt","limit":10}');
    assert.deepEqual(loadScript(writeJson("bare.json", [{ content: "hi" }])), [{ content: "hi" }]);
  });

  test("rejects files that are not scripts, naming the problem", () => {
    assert.throws(() => loadScript(join(dir, "missing.json")), ScriptError);
    assert.throws(() => loadScript(writeJson("bad.json", "{not json")), /cannot read script/);
    assert.throws(() => loadScript(writeJson("obj.json", { steps: [] })), /expected an array of turns/);
    assert.throws(() => loadScript(writeJson("content.json", [{ content: 3 }])), /turn 0: content must be a string/);
    assert.throws(
      () => loadScript(writeJson("call.json", [{ tool_calls: [{ arguments: {} }] }])),
      /tool_calls\[0\] needs a string name/,
    );
  });
});

describe("scripted conversations", () => {
  let sim: SimServer;
  let url: string;
  const tools = [SHELL_TOOL, READ_TOOL];
  before(async () => {
    sim = await startSim({ port: 0, script: loadScript(FIXTURE) });
    url = `${sim.url}/v1/chat/completions`;
  });
  after(() => sim.close());

  const history: Json[] = [{ role: "user", content: "What is in this folder?" }];
  const results: Json[] = [];

  async function step(): Promise<Json> {
    const res = await postJson(url, { messages: history, tools, return_token_ids: true });
    assert.equal(res.status, 200);
    const message = res.body["choices"][0]["message"];
    history.push({
      role: "assistant",
      content: message["content"],
      reasoning: message["reasoning"],
      tool_calls: message["tool_calls"],
    });
    for (const call of message["tool_calls"]) history.push({ role: "tool", tool_call_id: call["id"], content: "ok" });
    results.push(res.body);
    return res.body;
  }

  test("turn k answers a history holding k assistant messages", async () => {
    const first = (await step())["choices"][0];
    assert.equal(first["message"]["reasoning"], "\nI will look at the directory first.\n");
    assert.deepEqual(
      first["message"]["tool_calls"].map((c: Json) => [c["function"]["name"], c["function"]["arguments"]]),
      [["bash", '{"command": "ls -la"}']],
    );

    const second = (await step())["choices"][0];
    assert.equal(second["finish_reason"], "tool_calls");
    assert.equal(second["message"]["content"], "\n\nReading them now.\n");
    // A string argument is model output: hermes re-serializes it with Python's separators.
    assert.deepEqual(
      second["message"]["tool_calls"].map((c: Json) => c["function"]["arguments"]),
      ['{"path": "a.txt", "limit": 10}', '{"path": "b.txt", "limit": 10}'],
    );
    assert.equal(
      tok.decode(second["token_ids"]),
      "<think>\nTwo files. Let me read both.\n</think>\n\nReading them now.\n" +
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt", "limit": 10}}\n</tool_call>\n' +
        '<tool_call>\n{"name": "read_file", "arguments": {"path":"b.txt","limit":10}}\n</tool_call><|im_end|>',
    );

    const third = (await step())["choices"][0];
    assert.equal(third["message"]["content"], "\n\na.txt and b.txt are both short.");
    assert.equal(third["finish_reason"], "stop");

    const beyond = (await step())["choices"][0];
    assert.equal(beyond["message"]["content"], "\n\nDone.");
  });

  test("a streamed turn with two tool calls gives both, by index, with the parser's arguments", async () => {
    const messages = [
      { role: "user", content: "go" },
      { role: "assistant", content: "x" },
    ];
    const whole = (await postJson(url, { messages, tools, return_token_ids: true })).body["choices"][0];
    const stream = await postSse(url, { messages, tools, return_token_ids: true, stream: true });
    const [got] = assembleChat(stream.chunks);
    assert.deepEqual(got!.tokenIds, whole["token_ids"]);
    assert.equal(got!.content, whole["message"]["content"]);
    assert.deepEqual(
      got!.toolCalls.map((c) => [c.name, c.arguments]),
      whole["message"]["tool_calls"].map((c: Json) => [c["function"]["name"], c["function"]["arguments"]]),
    );
    assert.equal(got!.finishReason, "tool_calls");
  });

  test("malformed tool-call JSON is not a tool call: the markup stays in content, as vLLM's parser leaves it", async () => {
    const local = await startSim({
      port: 0,
      script: [{ reasoning: "", tool_calls: [{ name: "bash", arguments: "{not json" }] }],
    });
    try {
      const res = await postJson(`${local.url}/v1/chat/completions`, { messages: history.slice(0, 1), tools });
      const choice = res.body["choices"][0];
      assert.deepEqual(choice["message"]["tool_calls"], []);
      assert.equal(choice["finish_reason"], "stop");
      assert.equal(
        choice["message"]["content"],
        '\n\n<tool_call>\n{"name": "bash", "arguments": {not json}\n</tool_call>',
      );
      const stream = await postSse(`${local.url}/v1/chat/completions`, {
        messages: history.slice(0, 1),
        tools,
        stream: true,
      });
      const [got] = assembleChat(stream.chunks);
      assert.equal(got!.content, choice["message"]["content"]);
      assert.equal(got!.toolCalls.length, 0);
    } finally {
      await local.close();
    }
  });

  test("a script turn with thinking disabled drops its reasoning", async () => {
    const res = await postJson(url, {
      messages: history.slice(0, 1),
      tools,
      chat_template_kwargs: { enable_thinking: false },
      return_token_ids: true,
    });
    const choice = res.body["choices"][0];
    assert.equal(choice["message"]["reasoning"], null);
    assert.ok(!tok.decode(choice["token_ids"]).includes("<think>"));
    assert.equal(choice["message"]["tool_calls"][0]["function"]["arguments"], '{"command": "ls -la"}');
  });
});
