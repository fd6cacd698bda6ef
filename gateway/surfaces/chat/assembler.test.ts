import assert from "node:assert/strict";
import { test } from "node:test";
import { ChatStreamAssembler, captureChatResponse } from "./assembler.ts";

test("streamed deltas assemble into one message with concatenated token ids per choice", () => {
  const a = new ChatStreamAssembler();
  a.add({
    id: "c1",
    created: 1,
    model: "m",
    prompt_token_ids: [1, 2, 3],
    choices: [{ index: 0, delta: { role: "assistant", content: "" } }],
  });
  a.add({
    choices: [
      {
        index: 0,
        delta: { reasoning_content: "think" },
        token_ids: [10, 11],
        logprobs: { content: [{ logprob: -0.5 }, { logprob: -0.25 }] },
      },
    ],
  });
  a.add({
    choices: [{ index: 1, delta: { content: "B" }, token_ids: [20], logprobs: { content: [{ logprob: -1 }] } }],
  });
  a.add({
    choices: [
      {
        index: 0,
        delta: { tool_calls: [{ index: 0, id: "t1", type: "function", function: { name: "sh", arguments: '{"c' } }] },
        token_ids: [12],
        logprobs: { content: [{ logprob: -0.125 }] },
      },
    ],
  });
  a.add({
    choices: [
      {
        index: 0,
        delta: { tool_calls: [{ index: 0, function: { arguments: 'md": 1}' } }] },
        token_ids: [13, 14],
        logprobs: { content: [{ logprob: -2 }, { logprob: -3 }] },
        finish_reason: "tool_calls",
      },
    ],
  });
  a.add({
    choices: [
      { index: 1, delta: {}, token_ids: [21], logprobs: { content: [{ logprob: -4 }] }, finish_reason: "stop" },
    ],
  });
  a.add({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 7 } });

  assert.deepEqual(a.promptTokenIds, [1, 2, 3]);
  assert.deepEqual(a.captures(), [
    { index: 0, tokenIds: [10, 11, 12, 13, 14], logprobs: [-0.5, -0.25, -0.125, -2, -3], finishReason: "tool_calls" },
    { index: 1, tokenIds: [20, 21], logprobs: [-1, -4], finishReason: "stop" },
  ]);
  const message = (a.assembled() as any).choices[0].message;
  assert.equal(message.reasoning_content, "think");
  assert.equal(message.content, null);
  assert.deepEqual(message.tool_calls, [
    { id: "t1", type: "function", function: { name: "sh", arguments: '{"cmd": 1}' } },
  ]);
  assert.deepEqual((a.assembled() as any).usage, { prompt_tokens: 3, completion_tokens: 7 });
});

test("prompt ids come from the first chunk only; a chunk without ids leaves the capture empty", () => {
  const a = new ChatStreamAssembler();
  a.add({ prompt_token_ids: [1], choices: [{ index: 0, delta: { content: "x" } }] });
  a.add({ prompt_token_ids: [9, 9], choices: [{ index: 0, delta: { content: "y" }, finish_reason: "stop" }] });
  assert.deepEqual(a.promptTokenIds, [1]);
  assert.deepEqual(a.captures(), [{ index: 0, tokenIds: [], logprobs: null, finishReason: "stop" }]);
});

test("non-streamed capture reads top-level prompt ids and per-choice ids and logprobs", () => {
  const captured = captureChatResponse({
    prompt_token_ids: [5, 6],
    choices: [
      { index: 0, token_ids: [7, 8], logprobs: { content: [{ logprob: -1 }, { logprob: -2 }] }, finish_reason: "stop" },
      { index: 1, token_ids: null, logprobs: null, finish_reason: "length" },
    ],
  });
  assert.deepEqual(captured, {
    promptTokenIds: [5, 6],
    choices: [
      { index: 0, tokenIds: [7, 8], logprobs: [-1, -2], finishReason: "stop" },
      { index: 1, tokenIds: [], logprobs: null, finishReason: "length" },
    ],
  });
});
