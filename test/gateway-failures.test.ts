// Failures are features: each shows what the harness gets and that what was recorded is not lost.
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { after, before, describe, test } from "node:test";
import { startGateway } from "../gateway/index.ts";
import { dropStoredCall } from "../store/test-support.ts";
import { createRollout, postJson, rolloutCalls, startStack, tempDir, until, type Stack } from "./helpers.ts";

const MESSAGES = [{ role: "user", content: "Say something long." }];

function waitFor(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 5000): Promise<unknown> {
  return until(async () => ((await check()) ? true : undefined), timeoutMs, what);
}

describe("gateway failure behaviour", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ gateway: { bodyLimitBytes: 64 * 1024 } });
  });
  after(async () => {
    await stack.close();
  });

  test("an upstream 500 reaches the harness verbatim and is recorded as upstream_error", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const direct = await postJson(
      `${stack.sim.url}/v1/chat/completions`,
      { messages: MESSAGES },
      { "x-sim-fault": "error" },
    );
    const res = await postJson(
      `${rollout.base_urls.openai}/chat/completions`,
      { messages: MESSAGES, stream: true },
      { "x-sim-fault": "error" },
    );
    assert.equal(res.status, 500);
    assert.equal(res.status, direct.status);
    assert.deepEqual(res.json, direct.json);
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(call!.status, "upstream_error");
    assert.equal(call!.httpStatus, 500);
    assert.deepEqual(call!.response, direct.json);
  });

  test("a mid-stream upstream reset breaks the harness's stream and keeps the partial capture", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const res = await fetch(`${rollout.base_urls.openai}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-sim-fault": "reset" },
      body: JSON.stringify({ messages: MESSAGES, stream: true }),
    });
    assert.equal(res.status, 200);
    await assert.rejects(res.text(), "the harness must see the stream break, not a clean end");
    await waitFor(async () => (await rolloutCalls(stack.gateway.url, rollout.id)).length === 1, "the call record");
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(call!.status, "upstream_error");
    assert.ok(call!.promptTokenIds && call!.promptTokenIds.length > 0, "prompt ids from the first chunk are kept");
  });

  for (const [fault, moment] of [
    ["stall", "mid-stream"],
    ["hang", "before the upstream answers"],
  ] as const) {
    test(`a harness that disconnects ${moment} aborts the upstream request and the call is client_aborted`, async () => {
      const rollout = await createRollout(stack.gateway.url);
      const abortedBefore = stack.sim.stats.aborted;
      const requestsBefore = stack.sim.stats.requests;
      const url = new URL(`${rollout.base_urls.openai}/chat/completions`);
      const req = httpRequest(url, {
        method: "POST",
        headers: { "content-type": "application/json", "x-sim-fault": fault },
      });
      req.on("error", () => {});
      let firstChunk = false;
      req.on("response", (res) => res.once("data", () => (firstChunk = true)));
      req.end(JSON.stringify({ messages: MESSAGES, stream: true }));
      if (fault === "stall") await waitFor(() => firstChunk, "the first streamed chunk");
      else await waitFor(() => stack.sim.stats.requests > requestsBefore, "the upstream to receive the call");
      req.destroy();
      await waitFor(() => stack.sim.stats.aborted > abortedBefore, "the upstream to see the abort");
      await waitFor(async () => (await rolloutCalls(stack.gateway.url, rollout.id)).length === 1, "the call record");
      const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
      assert.equal(call!.status, "client_aborted");
      if (fault === "stall") assert.ok(call!.promptTokenIds!.length > 0, "what arrived before the disconnect is kept");
    });
  }

  test("a call whose prompt would refer to a call missing from the store is not recorded: a 500, or its connection breaks; the rollout stays readable", async () => {
    const store = stack.gateway.context.store;
    const url = (rollout: { base_urls: { openai: string } }) => `${rollout.base_urls.openai}/chat/completions`;
    /** A first call, then its record removed, then the conversation continued: its prompt refers to the first call. */
    const continuedAfterLoss = async (rollout: Awaited<ReturnType<typeof createRollout>>) => {
      const first = await postJson(url(rollout), { messages: MESSAGES });
      assert.equal(first.status, 200);
      const seq = Number(first.headers.get("x-rlgate-call"));
      dropStoredCall(store, rollout.id, seq);
      const answer = { role: "assistant", content: first.json.choices[0].message.content };
      return { seq, messages: [...MESSAGES, answer, { role: "user", content: "Go on." }] };
    };

    const whole = await createRollout(stack.gateway.url);
    const lost = await continuedAfterLoss(whole);
    const refused = await postJson(url(whole), { messages: lost.messages });
    assert.equal(refused.status, 500);
    assert.equal(refused.json.error.code, "RLGATE_INTERNAL");
    assert.match(refused.json.error.message, new RegExp(`refers to call ${lost.seq}, which is not in the store`));
    assert.deepEqual(await rolloutCalls(stack.gateway.url, whole.id), [], "nothing recorded, and the rollout reads");
    const again = await postJson(url(whole), { messages: lost.messages });
    assert.equal(again.status, 200, "the next call is stored against what the store holds");
    assert.equal((await rolloutCalls(stack.gateway.url, whole.id)).length, 1);

    const streamed = await createRollout(stack.gateway.url);
    const lostToo = await continuedAfterLoss(streamed);
    // The stream's last read waits for the commit: a short answer read whole is refused before its first byte.
    const ending = await fetch(url(streamed), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: lostToo.messages, stream: true }),
    })
      .then((res) => res.text())
      .then(
        (text) => (text.includes("[DONE]") ? "a clean end" : "an end without [DONE]"),
        () => "a broken connection",
      );
    assert.equal(ending, "a broken connection", "the harness sees its call fail, never a clean end");
    assert.deepEqual(await rolloutCalls(stack.gateway.url, streamed.id), []);
  });

  test("malformed JSON, wrong types, empty bodies and unknown routes get OpenAI-style JSON errors", async () => {
    const url = `${stack.gateway.url}/v1/chat/completions`;
    const cases: Array<[string | object, number, RegExp]> = [
      ["{not json", 400, /not valid JSON/],
      ["", 400, /empty/],
      ["[1,2]", 400, /JSON object/],
      [{ messages: "hello" }, 400, /messages/],
      [{ messages: [] }, 400, /messages/],
      [{ messages: [{ content: "no role" }] }, 400, /role/],
      [{ messages: MESSAGES, n: "three" }, 400, /\bn\b/],
      [{ messages: MESSAGES, stream: "yes" }, 400, /stream/],
    ];
    for (const [body, status, message] of cases) {
      const res = await postJson(url, body);
      assert.equal(res.status, status, `${JSON.stringify(body)} → ${res.text}`);
      assert.equal(typeof res.json.error.message, "string");
      assert.match(res.json.error.message, message);
      assert.equal(res.json.error.type, "invalid_request_error");
      assert.equal(res.json.error.code, "RLGATE_BAD_REQUEST");
    }
    const missing = await fetch(`${stack.gateway.url}/nope`);
    assert.equal(missing.status, 404);
    assert.equal(((await missing.json()) as any).error.code, "RLGATE_NOT_FOUND");
    const unknownRollout = await postJson(`${stack.gateway.url}/r/does-not-exist/v1/chat/completions`, {
      messages: MESSAGES,
    });
    assert.equal(unknownRollout.status, 404);
    assert.match(unknownRollout.json.error.message, /unknown rollout/);
  });

  test("an oversized body gets a 413 and the gateway keeps serving", async () => {
    const big = { messages: [{ role: "user", content: "x".repeat(100 * 1024) }] };
    const res = await postJson(`${stack.gateway.url}/v1/chat/completions`, big);
    assert.equal(res.status, 413);
    assert.match(res.json.error.message, /exceeds the gateway's limit of 65536 bytes/);
    const ok = await postJson(`${stack.gateway.url}/v1/chat/completions`, { messages: MESSAGES });
    assert.equal(ok.status, 200);
  });

  test("an unreachable upstream gives a 502 JSON error and the attempt is recorded", async () => {
    const dataDir = tempDir("unreachable");
    // Port 9 on loopback (discard) is closed on these machines: connection refused.
    const gateway = await startGateway({ upstream: "http://127.0.0.1:9", port: 0, dataDir });
    try {
      const rollout = await createRollout(gateway.url);
      const res = await postJson(`${rollout.base_urls.openai}/chat/completions`, { messages: MESSAGES });
      assert.equal(res.status, 502);
      assert.equal(res.json.error.code, "RLGATE_UPSTREAM_UNREACHABLE");
      const [call] = await rolloutCalls(gateway.url, rollout.id);
      assert.equal(call!.status, "upstream_error");
      assert.equal(call!.httpStatus, null);
    } finally {
      await gateway.close();
    }
  });
});
