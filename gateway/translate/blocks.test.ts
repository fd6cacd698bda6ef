import assert from "node:assert/strict";
import { test } from "node:test";
import { ChatBlockSplitter, argumentsObject, type BlockEvent } from "./blocks.ts";

const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  choices: [{ index: 0, delta, ...extra }],
});

function run(chunks: Record<string, unknown>[]): {
  events: BlockEvent[];
  end: ReturnType<ChatBlockSplitter["end"]>["end"];
} {
  const splitter = new ChatBlockSplitter();
  const events = chunks.flatMap((c) => splitter.push(c));
  const last = splitter.end();
  return { events: [...events, ...last.events], end: last.end };
}

test("reasoning, then tool calls: the whitespace-only content between them is no block", () => {
  const { events, end } = run([
    { prompt_token_ids: [1, 2, 3], choices: [{ index: 0, delta: { role: "assistant", content: "" } }] },
    chunk({ reasoning_content: "think" }),
    chunk({ content: "\n\n" }),
    chunk({ tool_calls: [{ index: 0, id: "t1", type: "function", function: { name: "sh", arguments: "" } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: " 1}" } }] }),
    chunk({ tool_calls: [{ index: 1, id: "t2", type: "function", function: { name: "sh", arguments: "{}" } }] }),
    chunk({}, { finish_reason: "tool_calls", stop_reason: 151645 }),
    { choices: [], usage: { prompt_tokens: 3, completion_tokens: 9 } },
  ]);
  assert.deepEqual(events, [
    { type: "start", kind: "reasoning" },
    { type: "delta", kind: "reasoning", text: "think" },
    { type: "stop", kind: "reasoning" },
    { type: "start", kind: "tool", id: "t1", name: "sh" },
    { type: "delta", kind: "tool", text: '{"a":' },
    { type: "delta", kind: "tool", text: " 1}" },
    { type: "stop", kind: "tool" },
    { type: "start", kind: "tool", id: "t2", name: "sh" },
    { type: "delta", kind: "tool", text: "{}" },
    { type: "stop", kind: "tool" },
  ]);
  assert.deepEqual(end, { finishReason: "tool_calls", stopSequence: null, promptTokens: 3, completionTokens: 9 });
});

test("text opens at its first non-whitespace character, without vLLM's leading newlines; reasoning without the one after <think>", () => {
  const { events, end } = run([
    chunk({ reasoning_content: "\n" }),
    chunk({ reasoning_content: "Plan:\n" }),
    chunk({ content: "\n" }),
    chunk({ content: "\n Hi" }),
    chunk({ content: " there" }),
    chunk({}, { finish_reason: "stop", stop_reason: "END" }),
  ]);
  assert.deepEqual(events, [
    { type: "start", kind: "reasoning" },
    { type: "delta", kind: "reasoning", text: "Plan:\n" },
    { type: "stop", kind: "reasoning" },
    { type: "start", kind: "text" },
    { type: "delta", kind: "text", text: " Hi" },
    { type: "delta", kind: "text", text: " there" },
    { type: "stop", kind: "text" },
  ]);
  assert.equal(end.stopSequence, "END");
});

test("a whole message (SGLang's choice.message) splits like its stream; SGLang's matched_stop string is the stop sequence", () => {
  const splitter = new ChatBlockSplitter();
  const events = splitter.push({
    choices: [
      { index: 0, message: { content: "ok", reasoning_content: null }, finish_reason: "stop", matched_stop: "##" },
    ],
  });
  assert.deepEqual(events, [
    { type: "start", kind: "text" },
    { type: "delta", kind: "text", text: "ok" },
  ]);
  assert.equal(splitter.end().end.stopSequence, "##");
  assert.throws(() => splitter.push(chunk({ content: "late" })), /after the end/);
});

test("tool arguments become an object; anything else is kept under _raw", () => {
  assert.deepEqual(argumentsObject('{"a": 1}'), { a: 1 });
  assert.deepEqual(argumentsObject(""), {});
  assert.deepEqual(argumentsObject("[1]"), { _raw: "[1]" });
  assert.deepEqual(argumentsObject("{broken"), { _raw: "{broken" });
});
