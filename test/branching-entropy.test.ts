// Entropy for branch points (gateway/branching/entropy.ts): a rollout created with metadata.entropy_top_k asks the
// upstream for top logprobs (chat top_logprobs, completions logprobs: k) on every call whose harness asked for none,
// records each sampled token's entropy from them, and hands the harness the bytes it gets without them.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { chatEntropies } from "../gateway/branching/entropy.ts";
import { runAgent, stableTool } from "./branching-agent.ts";
import { createRollout, postJson, rolloutCalls, startStack, TOOLS, type Stack } from "./helpers.ts";

const MESSAGES = [
  { role: "system", content: "You are a coding agent." },
  { role: "user", content: "How many files are here?" },
];

/** The answer's bytes with what differs between any two calls (ids, timestamps) blanked. */
async function harnessBytes(baseUrl: string, body: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${baseUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  return (await res.text()).replace(/"(id|created)":("[^"]*"|\d+)/g, '"$1":_');
}

describe("entropy from top logprobs (messages mode)", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { seed: 3 } });
  });
  after(() => stack.close());

  for (const stream of [false, true]) {
    test(`${stream ? "streamed" : "whole"}: asked upstream, recorded per token, the harness's bytes unchanged`, async () => {
      const url = stack.gateway.url;
      const plain = await createRollout(url, {});
      const recorded = await createRollout(url, { metadata: { entropy_top_k: 5 } });
      const body = { messages: MESSAGES, tools: TOOLS, ...(stream ? { stream: true } : {}) };
      const before = stack.sim.requests.length;
      const without = await harnessBytes(plain.base_urls.openai, body);
      const withTop = await harnessBytes(recorded.base_urls.openai, body);
      assert.equal(withTop, without, "the harness gets what it would have got");
      const [asPlain, asRecorded] = stack.sim.requests.slice(before).map((r) => r.body as any);
      assert.equal(asPlain.top_logprobs, undefined);
      assert.equal(asRecorded.top_logprobs, 5);

      const [call] = await rolloutCalls(url, recorded.id);
      const choice = call!.choices[0]!;
      assert.equal(choice.entropies?.length, choice.tokenIds.length);
      // The same request straight to the (deterministic) sim: its top entries give the recorded entropies.
      const direct = (await postJson(`${stack.sim.url}/v1/chat/completions`, { ...asRecorded, stream: false })).json;
      const expected = chatEntropies(direct.choices[0].logprobs.content)!;
      choice.entropies!.forEach((h, i) => assert.ok(Math.abs(h - expected[i]!) < 1e-5, `token ${i}`));
      assert.ok(expected.every((h) => h > 0));
      assert.equal((await rolloutCalls(url, plain.id))[0]!.choices[0]!.entropies, undefined);
    });
  }

  test("a harness that asks for logprobs itself is forwarded as it asked, and gets its own top entries", async () => {
    const url = stack.gateway.url;
    const recorded = await createRollout(url, { metadata: { entropy_top_k: 5 } });
    const before = stack.sim.requests.length;
    const res = await postJson(`${recorded.base_urls.openai}/chat/completions`, {
      messages: MESSAGES,
      logprobs: true,
      top_logprobs: 2,
    });
    assert.equal(res.status, 200);
    assert.equal((stack.sim.requests[before]!.body as any).top_logprobs, 2);
    assert.ok(res.json.choices[0].logprobs.content.every((e: any) => e.top_logprobs.length === 2));
  });

  test("entropy_top_k outside 1..20 is refused", async () => {
    for (const k of [0, 21, 2.5, "5"]) {
      const r = await postJson(`${stack.gateway.url}/api/rollouts`, { metadata: { entropy_top_k: k } });
      assert.equal(r.status, 400);
      assert.match(r.json.error.message, /entropy_top_k must be a whole number in 1\.\.20/);
    }
  });
});

describe("entropy from top logprobs (tokens mode)", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { seed: 3 }, gateway: { prompts: "tokens" } });
  });
  after(() => stack.close());

  for (const stream of [false, true]) {
    test(`${stream ? "streamed" : "whole"}: the completions call asks logprobs: k; every sampled token has its entropy`, async () => {
      const url = stack.gateway.url;
      const plain = await createRollout(url, {});
      const recorded = await createRollout(url, { metadata: { entropy_top_k: 4 } });
      const a = await runAgent(plain.base_urls.openai, stableTool, { stream });
      const before = stack.sim.requests.length;
      const b = await runAgent(recorded.base_urls.openai, stableTool, { stream });
      const strip = (m: any) => ({ ...m, tool_calls: (m.tool_calls ?? []).map((c: any) => c.function) });
      assert.deepEqual(b.answers.map(strip), a.answers.map(strip));
      for (const r of stack.sim.requests.slice(before)) assert.equal((r.body as any).logprobs, 4);
      const calls = await rolloutCalls(url, recorded.id);
      assert.equal(calls.length, 2);
      for (const call of calls) {
        const choice = call.choices[0]!;
        assert.equal(choice.entropies?.length, choice.tokenIds.length);
        assert.ok(choice.entropies!.every((h) => Number.isFinite(h) && h > 0));
      }
    });
  }
});
