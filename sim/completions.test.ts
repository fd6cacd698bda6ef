import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { renderChat } from "../tokenizer/chat-template.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { startSim, type SimServer } from "./index.ts";
import { postJson, postSse, SHELL_TOOL, type Json } from "./test-helpers.ts";

const tok = qwen3Tokenizer();
const END_OF_TEXT = 151643;
let sim: SimServer;
let url: string;

before(async () => {
  sim = await startSim({ port: 0, seed: 3 });
  url = `${sim.url}/v1/completions`;
});
after(() => sim.close());

async function complete(body: Json): Promise<Json> {
  const res = await postJson(url, body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

describe("completions", () => {
  test("a text prompt: choice-level prompt_token_ids and token_ids, <|endoftext|> stop id", async () => {
    const body = await complete({ prompt: "Once upon a time", return_token_ids: true, max_tokens: 64 });
    assert.match(body["id"], /^cmpl-[0-9a-f]{32}$/);
    assert.equal(body["object"], "text_completion");
    const choice = body["choices"][0];
    assert.deepEqual(choice["prompt_token_ids"], tok.encode("Once upon a time"));
    const ids: number[] = choice["token_ids"];
    assert.equal(ids.at(-1), END_OF_TEXT);
    assert.equal(choice["stop_reason"], END_OF_TEXT);
    assert.equal(choice["finish_reason"], "stop");
    assert.equal(tok.decode(ids.slice(0, -1)), choice["text"]);
    assert.ok(choice["text"].length > 10);
    assert.deepEqual(body["usage"], {
      prompt_tokens: 4,
      total_tokens: 4 + ids.length,
      completion_tokens: ids.length,
      prompt_tokens_details: null,
    });
  });

  test("a token-id prompt is taken as is", async () => {
    const ids = tok.encode("The quick brown fox");
    const body = await complete({ prompt: ids, return_token_ids: true });
    assert.deepEqual(body["choices"][0]["prompt_token_ids"], ids);
  });

  test("max_tokens defaults to 16, as in vLLM's CompletionRequest", async () => {
    const prompt = renderChat([{ role: "user", content: "hi" }], { tools: [SHELL_TOOL] });
    const short = (await complete({ prompt, return_token_ids: true }))["choices"][0];
    assert.equal(short["token_ids"].length, 16);
    assert.equal(short["finish_reason"], "length");
  });

  test("a prompt that is a rendered Qwen3 chat gets a Qwen3 turn: thinking, a tool call, <|im_end|>", async () => {
    const prompt = renderChat([{ role: "user", content: "hi" }], { tools: [SHELL_TOOL] });
    const choice = (await complete({ prompt, return_token_ids: true, max_tokens: 500 }))["choices"][0];
    assert.equal(choice["finish_reason"], "stop");
    assert.equal(choice["stop_reason"], null);
    assert.equal(choice["token_ids"].at(-1), tok.imEndId);
    assert.match(
      choice["text"],
      /^<think>\n[\s\S]+\n<\/think>\n\n<tool_call>\n\{"name": "bash", "arguments": \{"command": "echo rlgate-sim"\}\}\n<\/tool_call>$/,
    );

    const noThink = renderChat([{ role: "user", content: "hi" }], { enableThinking: false });
    const plain = (await complete({ prompt: noThink, max_tokens: 500 }))["choices"][0];
    assert.ok(!plain["text"].includes("<think>"));
    assert.match(plain["text"], /hi/);
  });

  test("logprobs: N gives tokens, token_logprobs, up to N+1 top entries and text offsets; deterministic", async () => {
    const request = { prompt: "Hello", logprobs: 2, return_token_ids: true, max_tokens: 64 };
    const a = (await complete(request))["choices"][0];
    const b = (await complete(request))["choices"][0];
    assert.deepEqual(a["logprobs"], b["logprobs"]);
    const lp = a["logprobs"];
    const ids: number[] = a["token_ids"];
    assert.equal(lp["tokens"].length, ids.length);
    assert.deepEqual(
      lp["tokens"],
      ids.map((id) => tok.decode([id])),
    );
    assert.equal(lp["token_logprobs"].length, ids.length);
    lp["top_logprobs"].forEach((top: Record<string, number>, i: number) => {
      const entries = Object.entries(top);
      assert.ok(entries.length >= 2 && entries.length <= 3);
      assert.equal(top[lp["tokens"][i]], lp["token_logprobs"][i]);
    });
    let offset = 0;
    lp["tokens"].forEach((token: string, i: number) => {
      assert.equal(lp["text_offset"][i], offset);
      offset += [...token].length;
    });
    const none = (await complete({ prompt: "Hello" }))["choices"][0];
    assert.equal(none["logprobs"], null);
    assert.equal(none["token_ids"], null);
    assert.equal(none["prompt_token_ids"], null);
  });

  test("streamed: text and ids add up to the non-streamed choice; prompt ids ride on the first chunk only", async () => {
    const request = { prompt: "Hello", return_token_ids: true, logprobs: 1, max_tokens: 64 };
    const whole = (await complete(request))["choices"][0];
    const stream = await postSse(url, { ...request, stream: true, stream_options: { include_usage: true } });
    assert.ok(stream.done);
    const usage = stream.chunks.pop()!;
    assert.deepEqual(usage["choices"], []);
    assert.equal(usage["usage"]["completion_tokens"], whole["token_ids"].length);
    assert.equal(stream.chunks.length, whole["token_ids"].length);
    assert.equal(stream.chunks.map((c) => c["choices"][0]["text"]).join(""), whole["text"]);
    assert.deepEqual(
      stream.chunks.flatMap((c) => c["choices"][0]["token_ids"]),
      whole["token_ids"],
    );
    assert.deepEqual(
      stream.chunks.flatMap((c) => c["choices"][0]["logprobs"]["token_logprobs"]),
      whole["logprobs"]["token_logprobs"],
    );
    assert.deepEqual(
      stream.chunks.flatMap((c) => c["choices"][0]["logprobs"]["text_offset"]),
      whole["logprobs"]["text_offset"],
    );
    assert.deepEqual(stream.chunks[0]!["choices"][0]["prompt_token_ids"], whole["prompt_token_ids"]);
    for (const chunk of stream.chunks.slice(1)) assert.equal(chunk["choices"][0]["prompt_token_ids"], null);
    assert.equal(stream.chunks.at(-1)!["choices"][0]["finish_reason"], "stop");
    assert.equal(stream.chunks[0]!["usage"], null);
  });

  test("a batch of prompts times n gives prompt-major choice indices", async () => {
    const body = await complete({ prompt: ["one", "two"], n: 2, return_token_ids: true });
    assert.deepEqual(
      body["choices"].map((c: Json) => c["index"]),
      [0, 1, 2, 3],
    );
    assert.deepEqual(
      body["choices"].map((c: Json) => tok.decode(c["prompt_token_ids"])),
      ["one", "one", "two", "two"],
    );
    assert.notEqual(body["choices"][0]["text"], body["choices"][1]["text"]);
    assert.equal(body["usage"]["prompt_tokens"], 2);
  });

  test("bad prompts are 400s in vLLM's error shape", async () => {
    for (const prompt of [[999999], [], ""]) {
      const res = await postJson(url, { prompt });
      assert.equal(res.status, 400, JSON.stringify(prompt));
      assert.deepEqual(Object.keys(res.body["error"]), ["message", "type", "param", "code"]);
      assert.equal(res.body["error"]["code"], 400);
    }
    assert.equal((await postJson(url, { prompt: "x", echo: true })).status, 400);
    assert.equal((await postJson(url, { prompt: "x", logprobs: 21 })).status, 400);
  });
});

describe("prompt_logprobs (teacher-forced scoring, as vLLM answers it)", () => {
  test("a completion's tokens sent back in a token-id prompt score exactly as they did when sampled", async () => {
    const prompt = tok.encode(renderChat([{ role: "user", content: "Say something." }]));
    const sampled = await complete({ prompt, max_tokens: 24, logprobs: 0, return_token_ids: true });
    const ids: number[] = sampled["choices"][0]["token_ids"];
    const logprobs: number[] = sampled["choices"][0]["logprobs"]["token_logprobs"];
    const scored = await complete({ prompt: [...prompt, ...ids], max_tokens: 1, prompt_logprobs: 0 });
    const entries: Array<Json | null> = scored["choices"][0]["prompt_logprobs"];
    assert.equal(entries.length, prompt.length + ids.length);
    assert.equal(entries[0], null);
    ids.forEach((id, j) => {
      const entry = entries[prompt.length + j]![String(id)];
      assert.equal(entry["logprob"], logprobs[j], `token ${j}`);
      assert.ok(entry["rank"] >= 1);
      assert.equal(entry["decoded_token"], tok.decode([id]));
    });
  });

  test("k alternatives come with the prompt token, ranked 1..k; the prompt token carries its own rank", async () => {
    const body = await complete({ prompt: "Once upon a time", max_tokens: 1, prompt_logprobs: 3 });
    const entries: Array<Json | null> = body["choices"][0]["prompt_logprobs"];
    const ids = tok.encode("Once upon a time");
    for (let i = 1; i < ids.length; i++) {
      const entry = entries[i]!;
      const own = entry[String(ids[i])];
      const ranks = Object.entries(entry)
        .filter(([id]) => id !== String(ids[i]))
        .map(([, e]) => e["rank"]);
      assert.ok(Object.keys(entry).length === 3 || Object.keys(entry).length === 4, JSON.stringify(entry));
      if (own["rank"] <= 3) assert.deepEqual(new Set([...ranks, own["rank"]]), new Set([1, 2, 3]));
      else assert.deepEqual(ranks.sort(), [1, 2, 3]);
    }
  });

  test("logprob noise moves prompt logprobs; streams and k above 20 are refused as vLLM refuses them", async () => {
    const noisy = await startSim({ port: 0, seed: 3, logprobNoise: 0.5 });
    try {
      const prompt = tok.encode("The quick brown fox jumps over the lazy dog");
      const clean = (await complete({ prompt, max_tokens: 1, prompt_logprobs: 0 }))["choices"][0]["prompt_logprobs"];
      const moved = (await postJson(`${noisy.url}/v1/completions`, { prompt, max_tokens: 1, prompt_logprobs: 0 })).body[
        "choices"
      ][0]["prompt_logprobs"];
      const differing = prompt
        .slice(1)
        .filter((id, i) => clean[i + 1][String(id)]["logprob"] !== moved[i + 1][String(id)]["logprob"]);
      assert.ok(differing.length >= prompt.length / 2, `${differing.length} of ${prompt.length - 1} moved`);
    } finally {
      await noisy.close();
    }
    const stream = await postJson(url, { prompt: "hi", stream: true, prompt_logprobs: 0 });
    assert.equal(stream.status, 400);
    assert.match(stream.body["error"]["message"], /prompt_logprobs.*stream/);
    const many = await postJson(url, { prompt: "hi", prompt_logprobs: 21 });
    assert.equal(many.status, 400);
    assert.match(many.body["error"]["message"], /greater than max allowed: 20/);
  });

  // @huggingface/jinja drops the template's final newline, as jinja2 does without keep_trailing_newline.
  test("a sim started with another chat template renders chat prompts with it", async () => {
    const other = await startSim({
      port: 0,
      chatTemplate:
        "{% for m in messages %}<|im_start|>{{ m.role }}: {{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n",
    });
    try {
      const messages = [{ role: "user", content: "hello" }];
      const body = { messages, return_token_ids: true, max_tokens: 4 };
      const mine = await postJson(`${sim.url}/v1/chat/completions`, body);
      const theirs = await postJson(`${other.url}/v1/chat/completions`, body);
      assert.deepEqual(mine.body["prompt_token_ids"], tok.encode(renderChat(messages)));
      assert.deepEqual(
        theirs.body["prompt_token_ids"],
        tok.encode("<|im_start|>user: hello<|im_end|>\n<|im_start|>assistant"),
      );
    } finally {
      await other.close();
    }
  });
});
