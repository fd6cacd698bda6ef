import assert from "node:assert/strict";
import { test } from "node:test";
import { SseParser } from "../sse-parser.ts";
import type { Json } from "../upstream/fields.ts";
import type { HarnessWants } from "../upstream/flavor.ts";
import { isTokenOnlyChunk, vllmFlavor } from "../upstream/vllm.ts";
import { NativeStreamEvents } from "./native-events.ts";

const head = { id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "m" };
const tokenChunk = (delta: Json, id: number, token: string, extra: Json = {}) => ({
  ...head,
  choices: [
    {
      index: 0,
      delta,
      logprobs: { content: [{ token, logprob: -0.5, bytes: [...Buffer.from(token)], top_logprobs: [] }] },
      finish_reason: null,
      token_ids: [id],
      ...extra,
    },
  ],
});

/** A vLLM stream with what a harness must get right: prompt ids, text beyond ASCII, a token-only chunk, usage. */
const CHUNKS: Json[] = [
  {
    ...head,
    choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }],
    prompt_token_ids: [1, 2, 3],
  },
  tokenChunk({}, 151667, "<think>"),
  tokenChunk({ reasoning_content: "héllo → 世界 🎉" }, 5, "héllo → 世界 🎉"),
  tokenChunk({ content: 'a "quoted" ]} {[ \\ text' }, 6, ']}\\"'),
  tokenChunk({ content: "" }, 7, "<|im_end|>", { finish_reason: "stop", stop_reason: null }),
  { ...head, choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } },
];

/** What the relay gave the harness before it spliced chunks: each chunk parsed, nulled, serialized again. */
function reference(wants: HarnessWants): string {
  let out = "";
  for (const original of CHUNKS) {
    const chunk = structuredClone(original);
    if (!wants.tokenIds && isTokenOnlyChunk(chunk)) continue;
    if (!wants.promptTokenIds && "prompt_token_ids" in chunk) chunk["prompt_token_ids"] = null;
    for (const choice of chunk["choices"] as Json[]) {
      if (!wants.tokenIds && "token_ids" in choice) choice["token_ids"] = null;
      if (!wants.logprobs && "logprobs" in choice) choice["logprobs"] = null;
    }
    out += `data: ${JSON.stringify(chunk)}\n\n`;
  }
  return out;
}

function relayAll(stream: Buffer, size: number, wants: HarnessWants) {
  const parser = new SseParser();
  let tokens = 0;
  const events = new NativeStreamEvents(vllmFlavor.chat, wants, () => tokens++);
  const pieces: Buffer[] = [];
  for (let i = 0; i < stream.length; i += size) {
    const out = events.relay(parser.push(stream.subarray(i, i + size)));
    if (out !== null) pieces.push(Buffer.from(out));
  }
  return { harness: Buffer.concat(pieces).toString("utf8"), events, tokens };
}

const NOTHING: HarnessWants = { promptTokenIds: false, tokenIds: false, logprobs: false };

for (const [framing, prefix, eol] of [
  ["data: and LF", "data: ", "\n"],
  ["data: without a space", "data:", "\n"],
  ["CRLF", "data: ", "\r\n"],
] as const) {
  test(`a stream split at every byte boundary (${framing}) reaches the harness as before, and is captured whole`, () => {
    const body = CHUNKS.map((c) => `${prefix}${JSON.stringify(c)}${eol}${eol}`).join("") + `: keep-alive${eol}${eol}`;
    const stream = Buffer.from(`${body}${prefix}[DONE]${eol}${eol}`);
    const expected = reference(NOTHING) + `: keep-alive${eol}${eol}`;
    // Every size splits some chunk inside a multi-byte character (the stream holds 2-, 3- and 4-byte ones).
    for (let size = 1; size <= stream.length; size += size < 64 ? 1 : 97) {
      const { harness, events, tokens } = relayAll(stream, size, NOTHING);
      assert.equal(harness, expected, `chunk size ${size}`);
      assert.equal(events.held?.toString(), `${prefix}[DONE]${eol}${eol}`);
      assert.equal(tokens, 4);
      assert.deepEqual(events.assembler.promptTokenIds, [1, 2, 3]);
      const [choice] = events.assembler.captures();
      assert.deepEqual(choice?.tokenIds, [151667, 5, 6, 7]);
      assert.deepEqual(choice?.logprobs, [-0.5, -0.5, -0.5, -0.5]);
      assert.equal(choice?.finishReason, "stop");
      assert.equal(events.assembler.assembled()["choices"] instanceof Array, true);
    }
  });
}

test("what the harness asked for itself stays, for each combination of wants", () => {
  const stream = Buffer.from(CHUNKS.map((c) => `data: ${JSON.stringify(c)}\n\n`).join(""));
  for (const promptTokenIds of [false, true])
    for (const tokenIds of [false, true])
      for (const logprobs of [false, true]) {
        const wants = { promptTokenIds, tokenIds, logprobs };
        assert.equal(relayAll(stream, stream.length, wants).harness, reference(wants), JSON.stringify(wants));
      }
});

test("a chunk the upstream wrote in its own style keeps it: numbers, escapes and spaces are not rewritten", () => {
  // Python writes 1e-05 where JavaScript writes 0.00001; the harness gets what the upstream sent.
  const data =
    '{"id":"x","choices":[{"index":0, "delta":{"content":"caf\\u00e9"},"logprobs":{"content":[{"token":"caf\\u00e9","logprob":-1e-05}]},"finish_reason":null,"token_ids":[9]}]}';
  const wants = { promptTokenIds: false, tokenIds: false, logprobs: true };
  const { harness, events } = relayAll(Buffer.from(`data: ${data}\n\n`), 7, wants);
  assert.equal(harness, `data: ${data.replace('"token_ids":[9]', '"token_ids":null')}\n\n`);
  assert.deepEqual(events.assembler.captures()[0]?.logprobs, [-1e-5]);
});

test("an event of several data: lines, or with a repeated key, is serialized again rather than spliced", () => {
  const multiLine = 'data: {"id":"x","choices":[{"index":0,"delta":{"content":"a"},\ndata: "token_ids":[9]}]}\n\n';
  const duplicate =
    'data: {"id":"x","choices":[{"index":0,"delta":{"content":"b"},"token_ids":[1],"token_ids":[9]}]}\n\n';
  const { harness, events } = relayAll(Buffer.from(multiLine + duplicate), 5, NOTHING);
  assert.equal(
    harness,
    'data: {"id":"x","choices":[{"index":0,"delta":{"content":"a"},"token_ids":null}]}\n\n' +
      'data: {"id":"x","choices":[{"index":0,"delta":{"content":"b"},"token_ids":null}]}\n\n',
  );
  assert.deepEqual(events.assembler.captures()[0]?.tokenIds, [9, 9]);
});

test("error events and events that are not JSON objects pass through as sent, and fail the call", () => {
  const stream = Buffer.from('data: not json\n\ndata: {"error":{"message":"boom"}}\n\n');
  const { harness, events } = relayAll(stream, 3, NOTHING);
  assert.equal(harness, stream.toString());
  assert.match(events.malformed ?? "", /not a JSON object: not json/);
  assert.match(events.upstreamError ?? "", /boom/);
});
