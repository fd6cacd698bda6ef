import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { renderChat, renderChatIds } from "../tokenizer/chat-template.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { simLogprob, startSim, type SimServer } from "./index.ts";
import { assembleChat, postJson, postSse, SHELL_TOOL, type Json } from "./test-helpers.ts";

const tok = qwen3Tokenizer();
const IM_END = tok.imEndId;
let sim: SimServer;
let chatUrl: string;

before(async () => {
  sim = await startSim({ port: 0, seed: 7 });
  chatUrl = `${sim.url}/v1/chat/completions`;
});
after(() => sim.close());

const USER = [{ role: "user", content: "List the files here." }];
const WANT = { return_token_ids: true, logprobs: true };

async function chat(body: Json): Promise<Json> {
  const res = await postJson(chatUrl, body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

describe("chat completions (non-streamed)", () => {
  test("prompt_token_ids are the real Qwen3 template rendering of the messages and tools", async () => {
    const body = await chat({ messages: USER, tools: [SHELL_TOOL], ...WANT });
    assert.deepEqual(body["prompt_token_ids"], renderChatIds(USER, { tools: [SHELL_TOOL] }));
    assert.equal(body["usage"]["prompt_tokens"], body["prompt_token_ids"].length);
  });

  test("a tool call is written in Qwen3's format, ends with <|im_end|>, and is parsed like vLLM's hermes parser", async () => {
    const body = await chat({ messages: USER, tools: [SHELL_TOOL], ...WANT });
    const choice = body["choices"][0];
    const ids: number[] = choice["token_ids"];
    assert.equal(ids.at(-1), IM_END);
    const reasoning: string = choice["message"]["reasoning"];
    assert.match(reasoning, /^\n.*bash.*\n$/s);
    assert.equal(
      tok.decode(ids),
      `<think>${reasoning}</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"command": "echo rlgate-sim"}}\n</tool_call><|im_end|>`,
    );
    // vLLM returns the text between </think> and <tool_call> as content.
    assert.equal(choice["message"]["content"], "\n\n");
    assert.equal(choice["finish_reason"], "tool_calls");
    assert.equal(choice["stop_reason"], null);
    const [call] = choice["message"]["tool_calls"];
    assert.match(call["id"], /^chatcmpl-tool-[0-9a-f]{32}$/);
    assert.equal(call["type"], "function");
    assert.equal(call["function"]["name"], "bash");
    assert.equal(call["function"]["arguments"], '{"command": "echo rlgate-sim"}');
    assert.equal(body["usage"]["completion_tokens"], ids.length);
    assert.equal(body["usage"]["total_tokens"], ids.length + body["usage"]["prompt_tokens"]);
    assert.match(body["id"], /^chatcmpl-[0-9a-f]{32}$/);
    assert.equal(body["object"], "chat.completion");
    assert.equal(body["model"], "Qwen/Qwen3-8B");
  });

  test("after a tool result the answer quotes its first line, and the next prompt extends prompt ++ sampled ids", async () => {
    const tools = [SHELL_TOOL];
    const first = await chat({ messages: USER, tools, ...WANT });
    const message = first["choices"][0]["message"];
    const history = (content: string | null) => [
      ...USER,
      {
        role: "assistant",
        content,
        reasoning: message["reasoning"],
        tool_calls: message["tool_calls"],
      },
      { role: "tool", tool_call_id: message["tool_calls"][0]["id"], content: "rlgate-sim\nsecond line" },
    ];
    const second = await chat({ messages: history(null), tools, ...WANT });
    const answer = second["choices"][0];
    assert.equal(answer["finish_reason"], "stop");
    assert.deepEqual(answer["message"]["tool_calls"], []);
    assert.match(answer["message"]["content"], /^\n\n.*"rlgate-sim"$/s);
    assert.doesNotMatch(answer["message"]["content"], /second line/);
    const p1: number[] = first["prompt_token_ids"];
    const g1: number[] = first["choices"][0]["token_ids"];
    assert.deepEqual(second["prompt_token_ids"].slice(0, p1.length + g1.length), [...p1, ...g1]);

    // Sent back as vLLM returned it, the "\n\n" content makes the template write "\n\n\n" before <tool_call>:
    // the history is re-serialized right after </think>, as with a real Qwen3 behind vLLM.
    const resent = await chat({ messages: history(message["content"]), tools, ...WANT });
    const p2: number[] = resent["prompt_token_ids"];
    const after = p1.length + g1.indexOf(151668) + 1;
    assert.deepEqual(p2.slice(0, after), [...p1, ...g1].slice(0, after));
    assert.equal(tok.decode([p2[after]!]), "\n\n\n");
    assert.equal(tok.decode([g1[after - p1.length]!]), "\n\n");
  });

  test("without tools the model answers in text", async () => {
    const body = await chat({ messages: USER, ...WANT });
    const choice = body["choices"][0];
    assert.equal(choice["finish_reason"], "stop");
    assert.match(choice["message"]["content"], /List the files here\./);
    assert.equal(
      tok.decode(choice["token_ids"]),
      `<think>${choice["message"]["reasoning"]}</think>${choice["message"]["content"]}<|im_end|>`,
    );
  });

  test("enable_thinking=false: no <think> block is generated and content is null next to a tool call", async () => {
    const body = await chat({
      messages: USER,
      tools: [SHELL_TOOL],
      chat_template_kwargs: { enable_thinking: false },
      ...WANT,
    });
    assert.deepEqual(body["prompt_token_ids"], renderChatIds(USER, { tools: [SHELL_TOOL], enableThinking: false }));
    assert.ok(renderChat(USER, { enableThinking: false }).endsWith("<think>\n\n</think>\n\n"));
    const choice = body["choices"][0];
    assert.equal(choice["message"]["reasoning"], null);
    assert.equal(choice["message"]["content"], null);
    assert.equal(
      tok.decode(choice["token_ids"]),
      '<tool_call>\n{"name": "bash", "arguments": {"command": "echo rlgate-sim"}}\n</tool_call><|im_end|>',
    );
  });

  test("fields not asked for are null, as vLLM dumps them", async () => {
    const body = await chat({ messages: USER });
    assert.equal(body["prompt_token_ids"], null);
    assert.equal(body["choices"][0]["token_ids"], null);
    assert.equal(body["choices"][0]["logprobs"], null);
    assert.ok("kv_transfer_params" in body && body["kv_transfer_params"] === null);
  });

  test("max_tokens cuts the completion: finish_reason length, no EOS", async () => {
    for (const key of ["max_tokens", "max_completion_tokens"]) {
      const body = await chat({ messages: USER, tools: [SHELL_TOOL], [key]: 5, ...WANT });
      const choice = body["choices"][0];
      assert.equal(choice["finish_reason"], "length");
      assert.equal(choice["token_ids"].length, 5);
      assert.ok(!choice["token_ids"].includes(IM_END));
      assert.equal(choice["logprobs"]["content"].length, 5);
      assert.deepEqual(choice["message"]["tool_calls"], []);
    }
  });

  test("n > 1 gives distinct choices, each with its own ids and logprobs", async () => {
    const body = await chat({ messages: USER, n: 3, ...WANT });
    assert.equal(body["choices"].length, 3);
    const texts = new Set<string>();
    body["choices"].forEach((choice: Json, i: number) => {
      assert.equal(choice["index"], i);
      assert.equal(choice["token_ids"].at(-1), IM_END);
      assert.equal(choice["logprobs"]["content"].length, choice["token_ids"].length);
      texts.add(tok.decode(choice["token_ids"]));
    });
    assert.equal(texts.size, 3);
    const total = body["choices"].reduce((s: number, c: Json) => s + c["token_ids"].length, 0);
    assert.equal(body["usage"]["completion_tokens"], total);
  });

  test("stop strings cut the text and are reported as stop_reason", async () => {
    const body = await chat({ messages: USER, stop: ["rlgate"], ...WANT });
    const choice = body["choices"][0];
    assert.equal(choice["finish_reason"], "stop");
    assert.equal(choice["stop_reason"], "rlgate");
    assert.ok(!choice["message"]["content"].includes("rlgate"));
    assert.ok(tok.decode(choice["token_ids"]).includes("rlgate"));
  });
});

describe("logprobs", () => {
  test("are deterministic, aligned 1:1 with token_ids, and equal the sim's model of (seed, context, token)", async () => {
    const request = { messages: USER, tools: [SHELL_TOOL], ...WANT, top_logprobs: 3 };
    const a = await chat(request);
    const b = await chat(request);
    const ids: number[] = a["choices"][0]["token_ids"];
    const entries: Json[] = a["choices"][0]["logprobs"]["content"];
    assert.deepEqual(entries, b["choices"][0]["logprobs"]["content"]);
    assert.equal(entries.length, ids.length);
    const prompt: number[] = a["prompt_token_ids"];
    entries.forEach((entry, i) => {
      assert.equal(entry["token"], tok.decode([ids[i]!]));
      assert.deepEqual(entry["bytes"], [...Buffer.from(entry["token"], "utf8")]);
      assert.ok(entry["logprob"] <= 0 && entry["logprob"] > -6);
      assert.equal(entry["logprob"], Math.fround(simLogprob(7, [...prompt, ...ids.slice(0, i)], ids[i]!)));
      // vLLM lists the sampled token first, then the top ranks.
      assert.equal(entry["top_logprobs"].length, 3);
      assert.equal(entry["top_logprobs"][0]["token"], entry["token"]);
      assert.equal(entry["top_logprobs"][0]["logprob"], entry["logprob"]);
    });
  });

  test("change with the server seed", async () => {
    const other = await startSim({ port: 0, seed: 8 });
    try {
      const request = { messages: USER, ...WANT };
      const a = await chat(request);
      const b = (await postJson(`${other.url}/v1/chat/completions`, request)).body;
      const la = a["choices"][0]["logprobs"]["content"].map((e: Json) => e["logprob"]);
      const lb = b["choices"][0]["logprobs"]["content"].map((e: Json) => e["logprob"]);
      assert.notDeepEqual(la, lb);
    } finally {
      await other.close();
    }
  });

  test("top_logprobs without logprobs is a 400", async () => {
    const res = await postJson(chatUrl, { messages: USER, top_logprobs: 2 });
    assert.equal(res.status, 400);
    assert.equal(res.body["error"]["type"], "BadRequestError");
  });
});

describe("chat completions (streamed)", () => {
  test("chunks rebuild the non-streamed response: ids, logprobs, reasoning, content and tool calls", async () => {
    const request = { messages: USER, tools: [SHELL_TOOL], ...WANT };
    const whole = await chat(request);
    const stream = await postSse(chatUrl, { ...request, stream: true });
    assert.equal(stream.status, 200);
    assert.equal(stream.contentType, "text/event-stream; charset=utf-8");
    assert.ok(stream.done);
    const first = stream.chunks[0]!;
    assert.deepEqual(first["choices"][0]["delta"], { role: "assistant", content: "" });
    assert.deepEqual(first["prompt_token_ids"], whole["prompt_token_ids"]);
    assert.ok(stream.chunks.slice(1).every((c) => !("prompt_token_ids" in c)));
    const [got] = assembleChat(stream.chunks);
    const want = whole["choices"][0];
    assert.deepEqual(got!.tokenIds, want["token_ids"]);
    assert.deepEqual(got!.logprobs, want["logprobs"]["content"]);
    assert.equal(got!.reasoning, want["message"]["reasoning"]);
    assert.equal(got!.content, want["message"]["content"]);
    assert.equal(got!.toolCalls.length, 1);
    assert.equal(got!.toolCalls[0]!.name, "bash");
    assert.equal(got!.toolCalls[0]!.arguments, want["message"]["tool_calls"][0]["function"]["arguments"]);
    assert.match(got!.toolCalls[0]!.id!, /^chatcmpl-tool-/);
    assert.equal(got!.finishReason, "tool_calls");
    // One token per chunk after the role chunk: every sampled id arrives exactly once.
    assert.equal(got!.chunkCount, 1 + want["token_ids"].length);
    for (const chunk of stream.chunks.slice(1)) assert.equal(chunk["choices"][0]["token_ids"].length, 1);
    assert.equal(stream.chunks.at(-1)!["choices"][0]["finish_reason"], "tool_calls");
    assert.equal(stream.chunks.at(-1)!["choices"][0]["stop_reason"], null);
  });

  test("markup tokens carry their ids with an empty delta; text deltas never split a character", async () => {
    const script = [{ reasoning: "Emoji 🎉 and 中文 and é.", content: "Résumé: 🎉🎉 done — 完成" }];
    const local = await startSim({ port: 0, script });
    try {
      const request = { messages: USER, ...WANT };
      const whole = (await postJson(`${local.url}/v1/chat/completions`, request)).body;
      const stream = await postSse(`${local.url}/v1/chat/completions`, { ...request, stream: true });
      const [got] = assembleChat(stream.chunks);
      assert.equal(got!.content, whole["choices"][0]["message"]["content"]);
      assert.equal(got!.content, "\n\nRésumé: 🎉🎉 done — 完成");
      assert.equal(got!.reasoning, "\nEmoji 🎉 and 中文 and é.\n");
      assert.deepEqual(got!.tokenIds, whole["choices"][0]["token_ids"]);
      const deltas = stream.chunks.slice(1).map((c) => c["choices"][0]["delta"] as Json);
      for (const d of deltas) {
        for (const text of [d["content"], d["reasoning"]])
          if (typeof text === "string") assert.ok(!text.includes("\ufffd"), JSON.stringify(d));
      }
      const thinkChunk = stream.chunks.find((c) => c["choices"][0]["token_ids"]?.[0] === 151667);
      assert.deepEqual(thinkChunk?.["choices"][0]["delta"], {});
      // 🎉 is split over several byte-level tokens: some chunk carries an id but no text yet.
      const empty = deltas.filter((d, i) => Object.keys(d).length === 0 && i < deltas.length - 1);
      assert.ok(empty.length > 2, "expected held-back partial characters as well as <think>/</think>");
    } finally {
      await local.close();
    }
  });

  test("n > 1 streams interleave choices by index and each matches its non-streamed twin", async () => {
    const request = { messages: USER, tools: [SHELL_TOOL], n: 2, ...WANT };
    const whole = await chat(request);
    const stream = await postSse(chatUrl, { ...request, stream: true });
    assert.deepEqual(
      stream.chunks.slice(0, 2).map((c) => [c["choices"][0]["index"], c["choices"][0]["delta"]["role"]]),
      [
        [0, "assistant"],
        [1, "assistant"],
      ],
    );
    assert.deepEqual(
      stream.chunks.slice(2, 6).map((c) => c["choices"][0]["index"]),
      [0, 1, 0, 1],
    );
    const got = assembleChat(stream.chunks);
    assert.equal(got.length, 2);
    got.forEach((choice, i) => {
      assert.deepEqual(choice.tokenIds, whole["choices"][i]["token_ids"]);
      assert.equal(choice.reasoning, whole["choices"][i]["message"]["reasoning"]);
    });
    assert.notEqual(got[0]!.reasoning, got[1]!.reasoning);
  });

  test("max_tokens in a stream: the last chunk says length and the ids stop short", async () => {
    const stream = await postSse(chatUrl, { messages: USER, max_tokens: 4, stream: true, ...WANT });
    const [got] = assembleChat(stream.chunks);
    assert.equal(got!.tokenIds.length, 4);
    assert.equal(got!.finishReason, "length");
  });

  test("include_usage adds a final usage chunk with real counts; unrequested ids are null, empty deltas skipped", async () => {
    const whole = await chat({ messages: USER, ...WANT });
    const stream = await postSse(chatUrl, { messages: USER, stream: true, stream_options: { include_usage: true } });
    const usage = stream.chunks.at(-1)!;
    assert.deepEqual(usage["choices"], []);
    assert.deepEqual(usage["usage"], {
      prompt_tokens: whole["usage"]["prompt_tokens"],
      total_tokens: whole["usage"]["total_tokens"],
      completion_tokens: whole["usage"]["completion_tokens"],
    });
    // vLLM sets these explicitly to None when not asked for, and exclude_unset keeps them as null.
    assert.equal(stream.chunks[0]!["prompt_token_ids"], null);
    const tokenChunks = stream.chunks.slice(1, -1);
    for (const chunk of tokenChunks) {
      assert.equal(chunk["choices"][0]["token_ids"], null);
      assert.equal(chunk["choices"][0]["logprobs"], null);
    }
    // <think> and </think> send nothing when neither ids nor logprobs were asked for.
    assert.equal(tokenChunks.length, whole["choices"][0]["token_ids"].length - 2);
  });

  test("continuous_usage_stats puts running usage on every chunk", async () => {
    const stream = await postSse(chatUrl, {
      messages: USER,
      stream: true,
      return_token_ids: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    });
    const chunks = stream.chunks.slice(1, -1);
    chunks.forEach((chunk, i) => assert.equal(chunk["usage"]["completion_tokens"], i + 1));
  });
});
