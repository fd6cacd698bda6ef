import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { storedResponse } from "./call-codec.ts";
import { Store } from "./store.ts";
import { expandStream, foldChatChunks, foldCompletionChunks, streamChunks } from "./stream-response.ts";
import { testCallRecord } from "./test-support.ts";

const HEAD = { id: "chatcmpl-1", object: "chat.completion.chunk", created: 7, model: "m" };
const chunk = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  ...HEAD,
  choices: [{ index: 0, logprobs: null, finish_reason: null, token_ids: null, ...choice }],
  ...extra,
});
const event = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;

/** A chat stream as a harness that asked for nothing receives it: reasoning, text, a tool call, an error-free end. */
const CHAT_EVENTS = [
  chunk({ delta: { role: "assistant", content: "" } }, { prompt_token_ids: null }),
  chunk({ delta: { reasoning_content: "think" } }),
  chunk({ delta: { content: "Hel" } }),
  chunk({ delta: { content: "lo \u00e9" } }),
  chunk({ delta: { tool_calls: [{ id: "c1", type: "function", index: 0, function: { name: "sh", arguments: "" } }] } }),
  chunk({ delta: { tool_calls: [{ index: 0, function: { arguments: '{"a":1}' } }] } }),
  chunk({ delta: {}, finish_reason: "tool_calls", stop_reason: null }),
];

const WHOLE = {
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 7,
  model: "m",
  choices: [
    {
      index: 0,
      message: {
        role: "assistant",
        content: "Hello é",
        reasoning_content: "think",
        tool_calls: [{ id: "c1", type: "function", function: { name: "sh", arguments: '{"a":1}' } }],
      },
      logprobs: null,
      finish_reason: "tool_calls",
      stop_reason: null,
    },
  ],
  usage: null,
};

test("a chat stream's events fold into the whole response; [DONE], comments, errors and broken events are left out", () => {
  const sse = Buffer.from(
    `: keep-alive\n\n${CHAT_EVENTS.map(event).join("")}data: not json\n\n${event({ error: { message: "x" } })}data: [DONE]\n\n`,
  );
  assert.deepStrictEqual(foldChatChunks(streamChunks(sse)), WHOLE);
  // An empty stream folds into a response without choices (a call that failed before its first event).
  assert.deepStrictEqual(foldChatChunks(streamChunks(new Uint8Array(0)))["choices"], []);
});

test("a completion stream folds per choice: text, ids only where the harness got them, logprob arrays joined", () => {
  const head = { id: "cmpl-1", object: "text_completion", created: 1, model: "m" };
  const chunks = [
    { ...head, choices: [{ index: 1, text: "b", logprobs: null, finish_reason: null, token_ids: [5] }] },
    { ...head, choices: [{ index: 0, text: "a", logprobs: { token_logprobs: [-1], tokens: ["a"] }, token_ids: null }] },
    { ...head, choices: [{ index: 0, text: "c", finish_reason: "stop", prompt_token_ids: [1, 2] }], usage: { n: 1 } },
  ];
  const whole = foldCompletionChunks(chunks);
  assert.deepStrictEqual(whole["choices"], [
    {
      index: 0,
      text: "ac",
      logprobs: { text_offset: [], token_logprobs: [-1], tokens: ["a"], top_logprobs: [] },
      finish_reason: "stop",
      stop_reason: null,
      prompt_token_ids: [1, 2],
      token_ids: null,
    },
    {
      index: 1,
      text: "b",
      logprobs: null,
      finish_reason: null,
      stop_reason: null,
      prompt_token_ids: null,
      token_ids: [5],
    },
  ]);
  assert.deepStrictEqual(whole["usage"], { n: 1 });
});

test("a streamed call is stored as its whole response and read back as it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-stream-"));
  const store = new Store({ path: dir });
  try {
    const streamed = testCallRecord({
      seq: store.nextCallSeq(),
      stream: true,
      response: foldChatChunks(streamChunks(Buffer.from(CHAT_EVENTS.map(event).join("")))),
      promptTokenIds: [1, 2],
      choices: [{ index: 0, tokenIds: [3, 4], logprobs: [-0.5, -0.25], finishReason: "tool_calls" }],
    });
    await store.putCall(streamed);
    assert.deepStrictEqual(store.getCall(null, streamed.seq)?.response, WHOLE);
    assert.deepStrictEqual(
      store.listCalls(null).map((c) => c.response),
      [WHOLE],
    );
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a stream kept as its events (as some stores hold them) reads as its whole response, with or without its head kept once", () => {
  const sse = Buffer.from(`${CHAT_EVENTS.map(event).join("")}: comment\n\ndata: [DONE]\n\n`);
  assert.deepStrictEqual(storedResponse({ sse, object: "chat.completion" }), WHOLE);
  // The head every event shares kept once, each event that had it marked by a NUL byte.
  const head = sse.subarray(0, sse.indexOf('"choices":[') + '"choices":['.length);
  const marked = sse.toString("latin1").split(head.toString("latin1")).join("\u0000");
  const compact = Buffer.from(marked, "latin1");
  assert.deepStrictEqual(expandStream(compact, head), sse);
  assert.deepStrictEqual(storedResponse({ sse: compact, object: "chat.completion", head }), WHOLE);
});
