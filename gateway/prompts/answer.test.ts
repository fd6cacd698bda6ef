import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { qwen3ChatFormat } from "../../tokenizer/model-format.ts";
import { ChatChunkStream, chatFromCompletion, type AnswerSettings } from "./answer.ts";

type Json = Record<string, any>;

const format = qwen3ChatFormat();
const settings: AnswerSettings = { format, toolParsing: true, includeReasoning: true };
const TEXT =
  '<think>\nPlan é.\n</think>\n\nReading 😀 now.\n<tool_call>\n{"name": "read", "arguments": {"path": "a"}}\n</tool_call>\n<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>';

/** A vLLM completion stream of the text's ids, `size` tokens a chunk, the finish on the last token or on its own. */
function completionChunks(size: number, separateFinish: boolean): Json[] {
  const ids = [...format.encode(TEXT), format.turnEnd.id];
  const pieces = format.textPieces(ids);
  const chunks: Json[] = [];
  for (let at = 0; at < ids.length; at += size) {
    const last = at + size >= ids.length;
    chunks.push({
      model: "m",
      choices: [
        {
          index: 0,
          text: pieces.slice(at, at + size).join(""),
          token_ids: ids.slice(at, at + size),
          logprobs: { token_logprobs: ids.slice(at, at + size).map(() => -0.5) },
          finish_reason: last && !separateFinish ? "stop" : null,
          prompt_token_ids: at === 0 ? [1, 2, 3] : null,
        },
      ],
    });
  }
  if (separateFinish)
    chunks.push({ model: "m", choices: [{ index: 0, text: "", token_ids: [], finish_reason: "stop" }] });
  return chunks;
}

function run(chunks: Json[]): { out: Json[]; stream: ChatChunkStream } {
  const stream = new ChatChunkStream(settings);
  const out = chunks.flatMap((chunk) => stream.push(chunk));
  return { out, stream };
}

function assembled(out: Json[]): Json {
  const message: Json = { content: "", reasoning: "", calls: [] as Json[], finish: null, ids: [] as number[] };
  for (const chunk of out) {
    const choice = chunk["choices"][0];
    const delta = choice.delta;
    message.content += delta.content ?? "";
    message.reasoning += delta.reasoning ?? "";
    for (const call of delta.tool_calls ?? []) {
      message.calls[call.index] ??= { name: "", arguments: "" };
      if (call.function.name) message.calls[call.index].name = call.function.name;
      message.calls[call.index].arguments += call.function.arguments ?? "";
    }
    message.finish = choice.finish_reason ?? message.finish;
    message.ids.push(...(choice.token_ids ?? []));
  }
  return message;
}

describe("completion → chat answer", () => {
  test("a stream read one token a chunk, several tokens a chunk, or with its finish apart gives the same answer", () => {
    const one = assembled(run(completionChunks(1, false)).out);
    assert.equal(one.reasoning, "\nPlan é.\n");
    assert.equal(one.content, "\n\nReading 😀 now.\n");
    assert.deepEqual(one.calls, [
      { name: "read", arguments: '{"path": "a"}' },
      { name: "ls", arguments: "{}" },
    ]);
    assert.equal(one.finish, "tool_calls");
    assert.deepEqual(one.ids, [...format.encode(TEXT), format.turnEnd.id]);
    for (const [size, apart] of [
      [3, false],
      [7, true],
      [1, true],
    ] as const) {
      assert.deepEqual(
        assembled(run(completionChunks(size, apart)).out),
        one,
        `${size} a chunk, finish apart: ${apart}`,
      );
    }
  });

  test("the last token's chunk carries the finish reason, and text goes out before the generation ends", () => {
    const chunks = completionChunks(1, false);
    const stream = new ChatChunkStream(settings);
    const early: Json[] = chunks.slice(0, 10).flatMap((chunk) => stream.push(chunk));
    assert.ok(
      early.some((c) => c["choices"][0].delta.reasoning),
      "reasoning streamed before the end",
    );
    const rest: Json[] = chunks.slice(10).flatMap((chunk) => stream.push(chunk));
    const finishes = [...early, ...rest].filter((c) => c["choices"][0].finish_reason);
    assert.equal(finishes.length, 1);
    assert.deepEqual(finishes[0]!["choices"][0].token_ids, [format.turnEnd.id]);
    assert.ok(stream.complete);
    assert.equal((stream.answers()[0]!.message as Json)["tool_calls"].length, 2);
  });

  test("the whole response parses to the message the stream adds up to", () => {
    const ids = [...format.encode(TEXT), format.turnEnd.id];
    const { chat: whole, answers } = chatFromCompletion(
      {
        model: "m",
        choices: [
          { index: 0, text: TEXT, token_ids: ids, prompt_token_ids: [1, 2, 3], finish_reason: "stop", logprobs: null },
        ],
        usage: null,
      },
      settings,
    );
    const chat = whole as Json;
    const message = chat["choices"][0].message;
    const streamed = assembled(run(completionChunks(1, false)).out);
    assert.equal(message.content, streamed.content);
    assert.equal(message.reasoning, streamed.reasoning);
    assert.deepEqual(
      message.tool_calls.map((c: Json) => ({ name: c.function.name, arguments: c.function.arguments })),
      streamed.calls,
    );
    assert.equal(chat["choices"][0].finish_reason, "tool_calls");
    assert.deepEqual(chat["prompt_token_ids"], [1, 2, 3]);
    assert.deepEqual(answers[0]!.tokenIds, ids);
  });

  test("a malformed tool call is content, as vLLM's hermes parser reports it", () => {
    const text = "<tool_call>\nnot json\n</tool_call>";
    const ids = [...format.encode(text), format.turnEnd.id];
    const pieces = format.textPieces(ids);
    const out = run(
      ids.map((id, i) => ({
        choices: [{ index: 0, text: pieces[i], token_ids: [id], finish_reason: i === ids.length - 1 ? "stop" : null }],
      })),
    ).out;
    const message = assembled(out);
    assert.equal(message.content, text);
    assert.deepEqual(message.calls, []);
    assert.equal(message.finish, "stop");
  });
});
