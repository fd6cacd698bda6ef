import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { reasoningOfSignature } from "../../translate/carried-reasoning.ts";
import type { Json } from "../../upstream/fields.ts";
import { GeminiEncoder, type GeminiAnswerOptions } from "./encoder.ts";

const OPTIONS: GeminiAnswerOptions = {
  model: "gemini-2.5-flash",
  candidates: 1,
  includeThoughts: true,
  framing: "sse",
};

/** vLLM's stream chunks for one choice: each delta with its token ids. */
function chunk(delta: Json, ids: number[], extra: Json = {}, index = 0): Json {
  return { choices: [{ index, delta, token_ids: ids, finish_reason: null, ...extra }] };
}

const TOOL_ANSWER: Json[] = [
  { prompt_token_ids: [1, 2, 3], choices: [{ index: 0, delta: { role: "assistant", content: "" }, token_ids: [] }] },
  chunk({ reasoning: "\n" }, [10]),
  chunk({ reasoning: "Look" }, [11]),
  chunk({ reasoning: " first." }, [12, 13]),
  chunk({ content: "\n\n" }, [14]),
  chunk({ tool_calls: [{ index: 0, id: "call-1", type: "function", function: { name: "ls", arguments: "" } }] }, [15]),
  chunk({ tool_calls: [{ index: 0, function: { arguments: '{"p": "."}' } }] }, [16, 17]),
  chunk({}, [18], { finish_reason: "tool_calls" }),
  { choices: [], usage: { prompt_tokens: 3, completion_tokens: 9, total_tokens: 12 } },
];

function sseResponses(text: string): Json[] {
  const events = text.split("\r\n\r\n");
  assert.equal(events.pop(), "");
  return events.map((event) => JSON.parse(event.replace(/^data: /, "")) as Json);
}

function encode(options: GeminiAnswerOptions, chunks: Json[]): { streamed: string; encoder: GeminiEncoder } {
  const encoder = new GeminiEncoder(options);
  let streamed = chunks.map((c) => encoder.chunk(c)).join("");
  const { frames, last } = encoder.finish();
  streamed += frames + last;
  return { streamed, encoder };
}

describe("Gemini encoder", () => {
  test("streamed: thought parts, the call whole with the signature, the finish with Google's usage", () => {
    const { streamed, encoder } = encode(OPTIONS, TOOL_ANSWER);
    const responses = sseResponses(streamed);
    const parts = responses.flatMap((r: any) => r.candidates[0].content?.parts ?? []);
    assert.deepEqual(parts.slice(0, 2), [
      { text: "Look", thought: true },
      { text: " first.", thought: true },
    ]);
    const call = parts[2];
    assert.deepEqual(call.functionCall, { id: "call-1", name: "ls", args: { p: "." } });
    assert.equal(reasoningOfSignature(call.thoughtSignature), "Look first.");
    assert.equal(parts.length, 3, "whitespace before the call is no part");
    const last: any = responses.at(-1);
    assert.equal(last.candidates[0].finishReason, "STOP");
    assert.deepEqual(last.usageMetadata, {
      promptTokenCount: 3,
      candidatesTokenCount: 5,
      totalTokenCount: 12,
      promptTokensDetails: [{ modality: "TEXT", tokenCount: 3 }],
      thoughtsTokenCount: 4, // the reasoning chunks' ids, its leading newline's too
    });
    for (const response of responses) {
      assert.equal(response["modelVersion"], "gemini-2.5-flash");
      assert.equal(response["responseId"], responses[0]!["responseId"]);
    }
    const whole: any = encoder.snapshot();
    assert.deepEqual(whole.candidates[0].content.parts, [
      { text: "Look first.", thought: true },
      { functionCall: { id: "call-1", name: "ls", args: { p: "." } }, thoughtSignature: call.thoughtSignature },
    ]);
    assert.deepEqual(whole.usageMetadata, last.usageMetadata);
  });

  test("without includeThoughts no thought part goes out; the signature still carries the reasoning", () => {
    const { streamed } = encode({ ...OPTIONS, includeThoughts: false }, TOOL_ANSWER);
    const parts = sseResponses(streamed).flatMap((r: any) => r.candidates[0].content?.parts ?? []);
    assert.equal(parts.length, 1);
    assert.equal(reasoningOfSignature(parts[0].thoughtSignature), "Look first.");
  });

  test("without alt=sse the responses are the elements of one JSON array", () => {
    const sse = sseResponses(encode(OPTIONS, TOOL_ANSWER).streamed);
    const { streamed } = encode({ ...OPTIONS, framing: "json-array" }, TOOL_ANSWER);
    assert.match(streamed, /^\[\{/);
    assert.match(streamed, /\}\n,\r\n\{/);
    const elements = JSON.parse(streamed) as Json[];
    const withoutIds = (rs: Json[]) => JSON.stringify(rs).replace(/"responseId":"\w+"/g, "");
    assert.equal(withoutIds(elements), withoutIds(sse));
  });

  test("finish reasons: length → MAX_TOKENS, a stop string → STOP; several candidates each end on their own", () => {
    const chunks = [
      chunk({ content: "Hello" }, [1], {}, 0),
      chunk({ content: "Bye" }, [2], {}, 1),
      chunk({}, [], { finish_reason: "length" }, 0),
      chunk({}, [], { finish_reason: "stop", stop_reason: "END" }, 1),
      { choices: [], usage: { prompt_tokens: 4, completion_tokens: 2 } },
    ];
    const { encoder } = encode({ ...OPTIONS, candidates: 2 }, chunks);
    const whole: any = encoder.snapshot();
    assert.deepEqual(
      whole.candidates.map((c: any) => [c.index, c.content.parts, c.finishReason]),
      [
        [0, [{ text: "Hello" }], "MAX_TOKENS"],
        [1, [{ text: "Bye" }], "STOP"],
      ],
    );
    assert.equal(whole.usageMetadata.thoughtsTokenCount, undefined, "no reasoning, no thought count");
  });

  test("a failure mid-stream: Google's error object, bare in SSE, closing the array otherwise", () => {
    const sse = new GeminiEncoder(OPTIONS);
    sse.chunk(chunk({ content: "Hi" }, [1]));
    assert.deepEqual(JSON.parse(sse.failureFrame("reset")), {
      error: { code: 500, message: "upstream failed mid-answer: reset", status: "INTERNAL" },
    });
    const array = new GeminiEncoder({ ...OPTIONS, framing: "json-array" });
    const text = array.chunk(chunk({ content: "Hi" }, [1])) + array.failureFrame("reset");
    const elements = JSON.parse(text) as Json[];
    assert.equal(elements.length, 2);
    assert.equal((elements[1] as any).error.status, "INTERNAL");
  });
});
