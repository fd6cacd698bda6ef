import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";
import { renderChatIds } from "../tokenizer/chat-template.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { startSim, type SimServer } from "./index.ts";
import { postJson, postSse, SHELL_TOOL, until, type Json } from "./test-helpers.ts";

const tok = qwen3Tokenizer();
const USER = [{ role: "user", content: "hello" }];

describe("routes", () => {
  let sim: SimServer;
  before(async () => {
    sim = await startSim({ port: 0, model: "test/qwen3-sim", maxModelLen: 4096 });
  });
  after(() => sim.close());

  test("GET /v1/models lists the served model the vLLM way", async () => {
    const res = await fetch(`${sim.url}/v1/models`);
    const body = (await res.json()) as Json;
    assert.equal(body["object"], "list");
    assert.equal(body["data"].length, 1);
    const model = body["data"][0];
    assert.equal(model["id"], "test/qwen3-sim");
    assert.equal(model["owned_by"], "vllm");
    assert.equal(model["max_model_len"], 4096);
    assert.equal(model["root"], "test/qwen3-sim");
  });

  test("GET /health is 200 with an empty body; /version names the vLLM version imitated", async () => {
    const health = await fetch(`${sim.url}/health`);
    assert.equal(health.status, 200);
    assert.equal(await health.text(), "");
    assert.deepEqual(await (await fetch(`${sim.url}/version`)).json(), { version: "0.10.2" });
  });

  test("POST /tokenize takes a prompt or messages; /detokenize turns ids back into text", async () => {
    const text = await postJson(`${sim.url}/tokenize`, { prompt: "Hello, world!", return_token_strs: true });
    assert.deepEqual(text.body, {
      count: tok.encode("Hello, world!").length,
      max_model_len: 4096,
      tokens: tok.encode("Hello, world!"),
      token_strs: tok.encode("Hello, world!").map((id) => tok.idToToken(id)),
    });
    const chat = await postJson(`${sim.url}/tokenize`, { messages: USER, tools: [SHELL_TOOL] });
    assert.deepEqual(chat.body["tokens"], renderChatIds(USER, { tools: [SHELL_TOOL] }));
    assert.equal(chat.body["token_strs"], null);
    const noPrompt = await postJson(`${sim.url}/tokenize`, { messages: USER, add_generation_prompt: false });
    assert.deepEqual(noPrompt.body["tokens"], renderChatIds(USER, { addGenerationPrompt: false }));
    const back = await postJson(`${sim.url}/detokenize`, { tokens: chat.body["tokens"] });
    assert.equal(back.body["prompt"], tok.decode(chat.body["tokens"]));
  });

  test("unknown routes are FastAPI 404s, wrong methods 405s", async () => {
    const missing = await fetch(`${sim.url}/v1/nope`);
    assert.equal(missing.status, 404);
    assert.deepEqual(await missing.json(), { detail: "Not Found" });
    const wrong = await fetch(`${sim.url}/v1/chat/completions`);
    assert.equal(wrong.status, 405);
  });

  test("bad JSON and invalid fields are 400 BadRequestError in vLLM's error shape", async () => {
    const url = `${sim.url}/v1/chat/completions`;
    for (const body of [
      "{oops",
      { messages: "hi" },
      { messages: [] },
      { messages: USER, n: 0 },
      { messages: USER, max_tokens: 0 },
      {
        messages: USER,
        stream_options: { include_usage: true },
      },
    ]) {
      const res = await postJson(url, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.body["error"]["type"], "BadRequestError");
      assert.equal(res.body["error"]["param"], null);
      assert.equal(res.body["error"]["code"], 400);
      assert.equal(typeof res.body["error"]["message"], "string");
    }
  });

  test("a prompt longer than the context is a 400; an unknown model a 404", async () => {
    const long = await postJson(`${sim.url}/v1/chat/completions`, {
      messages: [{ role: "user", content: "word ".repeat(5000) }],
    });
    assert.equal(long.status, 400);
    assert.match(long.body["error"]["message"], /maximum context length is 4096 tokens/);
    const tooMany = await postJson(`${sim.url}/v1/chat/completions`, { messages: USER, max_tokens: 5000 });
    assert.equal(tooMany.status, 400);
    const model = await postJson(`${sim.url}/v1/chat/completions`, { model: "gpt-4", messages: USER });
    assert.equal(model.status, 404);
    assert.equal(model.body["error"]["type"], "NotFoundError");
    const named = await postJson(`${sim.url}/v1/chat/completions`, { model: "test/qwen3-sim", messages: USER });
    assert.equal(named.status, 200);
    assert.equal(named.body["model"], "test/qwen3-sim");
  });

  test("requests are recorded with their parsed body", async () => {
    await postJson(`${sim.url}/v1/chat/completions`, { messages: USER, return_token_ids: true, max_tokens: 3 });
    const last = sim.requests.at(-1)!;
    assert.equal(last.path, "/v1/chat/completions");
    assert.equal(last.method, "POST");
    assert.deepEqual(last.body, { messages: USER, return_token_ids: true, max_tokens: 3 });
    assert.equal(last.status, 200);
    await until(() => last.outcome === "ok");
  });
});

describe("faults per request (x-sim-fault, x-sim-delay-ms)", () => {
  let sim: SimServer;
  let url: string;
  before(async () => {
    sim = await startSim({ port: 0 });
    url = `${sim.url}/v1/chat/completions`;
  });
  after(() => sim.close());

  test("error: a 500 in vLLM's error shape, counted", async () => {
    const errors = sim.stats.errors;
    const res = await postJson(url, { messages: USER }, { "x-sim-fault": "error" });
    assert.equal(res.status, 500);
    assert.equal(res.body["error"]["type"], "InternalServerError");
    assert.equal(res.body["error"]["code"], 500);
    assert.equal(sim.stats.errors, errors + 1);
  });

  test("reset, non-streamed: the connection is destroyed before any response", async () => {
    const resets = sim.stats.resets;
    await assert.rejects(postJson(url, { messages: USER }, { "x-sim-fault": "reset" }));
    assert.equal(sim.stats.resets, resets + 1);
  });

  test("reset, streamed: a few chunks arrive, then the connection dies without [DONE]", async () => {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-sim-fault": "reset" },
      body: JSON.stringify({ messages: USER, stream: true, return_token_ids: true }),
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let received = "";
    await assert.rejects(async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        received += Buffer.from(value).toString("utf8");
      }
    });
    assert.match(received, /"role":"assistant"/);
    assert.doesNotMatch(received, /\[DONE\]/);
  });

  test("hang: no response until the client gives up, and the abort is counted", async () => {
    const aborted = sim.stats.aborted;
    const seen = new Promise((resolve) => sim.events.once("aborted", resolve));
    const controller = new AbortController();
    const pending = fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-sim-fault": "hang" },
      body: JSON.stringify({ messages: USER }),
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 100);
    await assert.rejects(pending, /abort/i);
    await seen;
    assert.equal(sim.stats.aborted, aborted + 1);
    assert.equal(sim.requests.at(-1)!.outcome, "aborted");
  });

  test("stall: a stream starts, then stops sending; the client's abort is counted", async () => {
    const aborted = sim.stats.aborted;
    const controller = new AbortController();
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-sim-fault": "stall" },
      body: JSON.stringify({ messages: USER, stream: true }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    const first = await reader.read();
    assert.match(Buffer.from(first.value!).toString("utf8"), /^data: /);
    controller.abort();
    await until(() => sim.stats.aborted === aborted + 1);
  });

  test("x-sim-delay-ms delays the response", async () => {
    const started = Date.now();
    const res = await postJson(url, { messages: USER }, { "x-sim-delay-ms": "150" });
    assert.equal(res.status, 200);
    assert.ok(Date.now() - started >= 145);
  });

  test("close() ends even with a request hanging", async () => {
    const local = await startSim({ port: 0 });
    const hung = new Promise<void>((resolve) => {
      const req = request(`${local.url}/v1/chat/completions`, { method: "POST", headers: { "x-sim-fault": "hang" } });
      req.on("error", () => resolve());
      req.end(JSON.stringify({ messages: USER }));
    });
    await until(() => local.stats.inFlight === 1);
    await local.close();
    await hung;
  });
});

describe("knobs", () => {
  test("ttftMs delays the first token; interTokenMs paces the stream", async () => {
    const sim = await startSim({ port: 0, ttftMs: 120, interTokenMs: 10 });
    try {
      const started = Date.now();
      const res = await fetch(`${sim.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ messages: USER, stream: true, return_token_ids: true, max_tokens: 8 }),
      });
      const reader = res.body!.getReader();
      await reader.read();
      const firstAt = Date.now() - started;
      let rest = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        rest += Buffer.from(value).toString("utf8");
      }
      const endAt = Date.now() - started;
      assert.ok(firstAt >= 115, `first chunk at ${firstAt} ms`);
      assert.ok(endAt - firstAt >= 65, `7 more steps took ${endAt - firstAt} ms`);
      assert.match(rest, /\[DONE\]/);
    } finally {
      await sim.close();
    }
  });

  // The timeout is what fails it: had the headers waited for ttftMs (an hour), fetch would not resolve within it; far
  // from both, it measures nothing of the machine's speed.
  test(
    "headers go out before the first token: a stream whose first token is an hour away has its 200 now",
    { timeout: 120_000 },
    async () => {
      const sim = await startSim({ port: 0, ttftMs: 3_600_000 });
      const controller = new AbortController();
      try {
        const res = await fetch(`${sim.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ messages: USER, stream: true, max_tokens: 8 }),
          signal: controller.signal,
        });
        assert.equal(res.status, 200);
        assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
      } finally {
        controller.abort();
        await sim.close();
      }
    },
  );

  test("prefillUsPerToken: the first token waits for the prompt tokens the sim has not cached", async () => {
    const sim = await startSim({ port: 0, prefillUsPerToken: 1000 });
    try {
      const long = [{ role: "user", content: "tell me about prefix caching ".repeat(40) }];
      const promptTokens = renderChatIds(long).length;
      const started = Date.now();
      const first = await postJson(`${sim.url}/v1/chat/completions`, { messages: long, max_tokens: 2 });
      assert.equal(first.status, 200);
      assert.ok(Date.now() - started >= promptTokens * 0.9, `a ${promptTokens}-token prompt at 1 ms/token`);
      assert.deepEqual(sim.prefixCache, { cachedTokens: 0, prefilledTokens: promptTokens });
      // The same conversation one turn on: its earlier prompt is a cached prefix, only the rest is prefilled.
      const next = [...long, { role: "assistant", content: "ok" }, { role: "user", content: "and then?" }];
      await postSse(`${sim.url}/v1/chat/completions`, { messages: next, max_tokens: 2, stream: true });
      const nextTokens = renderChatIds(next).length;
      const cached = Math.floor(promptTokens / 16) * 16;
      assert.deepEqual(sim.prefixCache, {
        cachedTokens: cached,
        prefilledTokens: promptTokens + nextTokens - cached,
      });
    } finally {
      await sim.close();
    }
  });

  test("without prefillUsPerToken the prefix-cache model is off", async () => {
    const sim = await startSim({ port: 0 });
    try {
      assert.equal(sim.prefixCache, null);
    } finally {
      await sim.close();
    }
  });

  test("errorRate draws from the seed: same seed, same sequence of failures", async () => {
    const statuses = async (seed: number) => {
      const sim = await startSim({ port: 0, seed, errorRate: 0.5 });
      try {
        const out: number[] = [];
        for (let i = 0; i < 20; i++)
          out.push((await postJson(`${sim.url}/v1/chat/completions`, { messages: USER, max_tokens: 2 })).status);
        // Other routes are never failed by the rate.
        assert.equal((await fetch(`${sim.url}/v1/models`)).status, 200);
        return out;
      } finally {
        await sim.close();
      }
    };
    const a = await statuses(11);
    assert.deepEqual(await statuses(11), a);
    assert.ok(a.includes(500) && a.includes(200), a.join(","));
    assert.notDeepEqual(await statuses(12), a);
  });

  test("resetRate 1 cuts every stream and no non-streamed response", async () => {
    const sim = await startSim({ port: 0, resetRate: 1 });
    try {
      const stream = await fetch(`${sim.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ messages: USER, stream: true }),
      });
      await assert.rejects(stream.text());
      assert.equal(sim.stats.resets, 1);
      assert.equal((await postJson(`${sim.url}/v1/chat/completions`, { messages: USER })).status, 200);
    } finally {
      await sim.close();
    }
  });

  test("logprobNoise perturbs reported logprobs, reproducibly, keeping them <= 0", async () => {
    const body = { messages: USER, tools: [SHELL_TOOL], logprobs: true, top_logprobs: 2 };
    const values = async (noise: number) => {
      const sim = await startSim({ port: 0, logprobNoise: noise });
      try {
        const res = await postJson(`${sim.url}/v1/chat/completions`, body);
        return (res.body["choices"][0]["logprobs"]["content"] as Json[]).map((e) => e["logprob"] as number);
      } finally {
        await sim.close();
      }
    };
    const clean = await values(0);
    const noisy = await values(0.5);
    assert.deepEqual(await values(0.5), noisy);
    assert.equal(noisy.length, clean.length);
    assert.ok(noisy.every((v) => v <= 0));
    const moved = noisy.filter((v, i) => Math.abs(v - clean[i]!) > 1e-3).length;
    assert.ok(moved > noisy.length / 2, `${moved} of ${noisy.length} moved`);
  });

  test("invalid rates are refused at start", async () => {
    await assert.rejects(startSim({ port: 0, errorRate: 2 }), RangeError);
  });
});

describe("completions faults", () => {
  test("x-sim-fault applies to /v1/completions too", async () => {
    const sim = await startSim({ port: 0 });
    try {
      const res = await postSse(`${sim.url}/v1/completions`, { prompt: "x", stream: true }, { "x-sim-fault": "error" });
      assert.equal(res.status, 500);
    } finally {
      await sim.close();
    }
  });
});
