// `rlgate replay score` against the sim: the same server scores captured completions exactly (Δ = 0); a server with
// logprob noise or another seed drifts, and the report's figures are the ones recomputed here from the raw pairs.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ReplayUpstream } from "../replay/upstream.ts";
import { scoreRollouts, type ScoreOptions } from "../replay/score.ts";
import { startSim, type SimServer } from "../sim/index.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import type { CallRecord, RolloutRecord } from "../store/records.ts";
import {
  AGENT_SCRIPT,
  createRollout,
  playAgent,
  postJson,
  rolloutCalls,
  runCli,
  startStack,
  type Stack,
} from "./helpers.ts";

const tokenizer = qwen3Tokenizer();

const cli = (args: string[]) => runCli(args);

/** numpy-style percentile, written out again so the report is checked against an independent computation. */
function naivePercentile(values: number[], q: number): number {
  const s = [...values].sort((a, b) => a - b);
  const at = (q / 100) * (s.length - 1);
  const lo = Math.floor(at);
  return s[lo]! + ((s[Math.min(lo + 1, s.length - 1)] ?? s[lo]!) - s[lo]!) * (at - lo);
}

describe("replay score", () => {
  let stack: Stack;
  let noisy: SimServer;
  let otherSeed: SimServer;
  const loaded: Array<{ rollout: RolloutRecord; calls: CallRecord[] }> = [];

  before(async () => {
    stack = await startStack({ sim: { seed: 7, script: AGENT_SCRIPT } });
    noisy = await startSim({ port: 0, seed: 7, script: AGENT_SCRIPT, logprobNoise: 0.3 });
    otherSeed = await startSim({ port: 0, seed: 8, script: AGENT_SCRIPT });
    for (const harness of ["alpha", "beta"]) {
      const rollout = await createRollout(stack.gateway.url, { group: "g-score", harness });
      await playAgent(rollout.base_urls.openai, AGENT_SCRIPT.length, true);
      const finished = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
      assert.equal(finished.status, 200, finished.text);
      const record = (await (await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}`)).json()) as RolloutRecord;
      loaded.push({ rollout: record, calls: await rolloutCalls(stack.gateway.url, rollout.id) });
    }
  });
  after(async () => {
    await noisy?.close();
    await otherSeed?.close();
    await stack?.close();
  });

  const score = (opts: ScoreOptions) =>
    scoreRollouts(
      loaded.map((l) => l.rollout),
      async (id) => loaded.find((l) => l.rollout.id === id)!.calls,
      opts,
    );
  const options = (url: string, threshold = 0.5): ScoreOptions => ({
    upstream: new ReplayUpstream({ url }),
    threshold,
    concurrency: 3,
    decode: (ids) => tokenizer.decode(ids),
  });

  test("the server that sampled the completions scores them exactly: Δ = 0 on every token, r = 1, KL 0", async () => {
    const report = await score(options(stack.sim.url));
    assert.deepEqual(report.errors, []);
    assert.deepEqual(report.skipped, []);
    const sampled = loaded.flatMap((r) => r.calls).reduce((n, c) => n + c.choices[0]!.tokenIds.length, 0);
    assert.equal(report.overall.tokens, sampled);
    assert.equal(report.overall.absDiffMax, 0);
    assert.equal(report.overall.k3Kl, 0);
    assert.ok(Math.abs(report.overall.pearson - 1) < 1e-12, String(report.overall.pearson));
    assert.equal(report.completions.length, 6);
    assert.ok(report.rollouts.every((r) => r.firstBeyond === null && r.agreement.absDiffMax === 0));
    assert.deepEqual(Object.keys(report.byHarness), ["*", "alpha", "beta"]);
  });

  test("a server with logprob noise drifts: every figure matches the pairs recomputed here, and the first drifted token is named in context", async () => {
    const threshold = 0.4;
    const report = await score(options(noisy.url, threshold));
    assert.deepEqual(report.errors, []);
    // The replayed values, fetched independently of the scorer.
    const deltas: number[] = [];
    type Drifted = { rolloutId: string; callSeq: number; position: number; delta: number };
    for (const { rollout, calls } of loaded) {
      let firstInRollout: Drifted | null = null as Drifted | null;
      for (const call of calls) {
        const choice = call.choices[0]!;
        const ids = [...call.promptTokenIds!, ...choice.tokenIds];
        const res = await postJson(`${noisy.url}/v1/completions`, { prompt: ids, max_tokens: 1, prompt_logprobs: 0 });
        const entries = res.json.choices[0].prompt_logprobs;
        choice.tokenIds.forEach((id, j) => {
          const delta = entries[call.promptTokenIds!.length + j][String(id)].logprob - choice.logprobs![j]!;
          deltas.push(Math.abs(delta));
          if (!firstInRollout && Math.abs(delta) > threshold) {
            firstInRollout = {
              rolloutId: rollout.id,
              callSeq: call.seq,
              position: call.promptTokenIds!.length + j,
              delta,
            };
          }
        });
      }
      const got = report.rollouts.find((r) => r.rolloutId === rollout.id)!.firstBeyond;
      const want = firstInRollout;
      assert.ok(want, "noise 0.3 puts some token beyond 0.4");
      assert.equal(got?.callSeq, want.callSeq);
      assert.equal(got?.position, want.position);
      assert.ok(Math.abs(got!.delta - want.delta) < 1e-9);
      assert.equal(got!.token, tokenizer.decode([got!.tokenId]));
      assert.ok(got!.before.length > 0, "the token is shown with the text before it");
    }
    assert.equal(report.overall.tokens, deltas.length);
    const mean = deltas.reduce((a, b) => a + b, 0) / deltas.length;
    assert.ok(Math.abs(report.overall.absDiffMean - mean) < 1e-9);
    assert.ok(Math.abs(report.overall.absDiffP50 - naivePercentile(deltas, 50)) < 1e-9);
    assert.ok(Math.abs(report.overall.absDiffP99 - naivePercentile(deltas, 99)) < 1e-9);
    assert.equal(report.overall.absDiffMax, Math.max(...deltas));
    // Noise of 0.3 on logprobs spread over [-6, 0]: still correlated, clearly not equal.
    assert.ok(report.overall.pearson > 0.8 && report.overall.pearson < 0.999, String(report.overall.pearson));
    assert.ok(report.overall.k3Kl > 0);
  });

  test("a server with another seed disagrees outright: r far below the 0.99 the field reports", async () => {
    const report = await score(options(otherSeed.url));
    assert.ok(report.overall.pearson < 0.5, String(report.overall.pearson));
    assert.ok(report.overall.absDiffP99 > 1);
  });

  test("what cannot be scored is said: a failed call is skipped with its reason, a completion the server refuses is an error", async () => {
    const rollout = await createRollout(stack.gateway.url, { group: "g-faults", harness: "alpha" });
    const failed = await postJson(
      `${rollout.base_urls.openai}/chat/completions`,
      { messages: [{ role: "user", content: "hi" }] },
      { "x-sim-fault": "error" },
    );
    assert.equal(failed.status, 500);
    await playAgent(rollout.base_urls.openai, 1, true);
    const record = (await (await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}`)).json()) as RolloutRecord;
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    const small = await startSim({ port: 0, seed: 7, maxModelLen: 64 });
    try {
      const report = await scoreRollouts([record], async () => calls, options(small.url));
      assert.deepEqual(
        report.skipped.map((s) => s.reason),
        ["call ended upstream_error"],
      );
      assert.equal(report.errors.length, 1);
      assert.match(report.errors[0]!.reason, /answered 400: .*maximum context length is 64 tokens/);
      assert.equal(report.overall.tokens, 0);
    } finally {
      await small.close();
    }
  });

  test("CLI: a summary table, --json, exit 0 within --max-p99 and exit 3 past it", async () => {
    const clean = await cli([
      "replay",
      "score",
      "--group",
      "g-score",
      "--gateway",
      stack.gateway.url,
      "--upstream",
      stack.sim.url,
      "--max-p99",
      "0",
    ]);
    assert.equal(clean.code, 0, clean.stderr + clean.stdout);
    assert.match(clean.stdout, /rollout\s+harness\s+completions\s+tokens\s+pearson r/);
    assert.match(clean.stdout, /p99 \|Δlogp\| 0\.0000 ≤ 0: ok/);

    const drift = await cli([
      "replay",
      "score",
      "--group",
      "g-score",
      "--gateway",
      stack.gateway.url,
      "--upstream",
      noisy.url,
      "--max-p99",
      "0.05",
    ]);
    assert.equal(drift.code, 3, drift.stderr + drift.stdout);
    assert.match(drift.stdout, /> 0\.05: FAILED/);
    assert.match(drift.stdout, /first token beyond \|Δlogp\| 0\.5/);
    assert.match(drift.stdout, /⟦.+⟧/);

    const json = await cli([
      "replay",
      "score",
      loaded[0]!.rollout.id,
      "--data",
      stack.dataDir,
      "--upstream",
      noisy.url,
      "--json",
    ]);
    assert.equal(json.code, 0, json.stderr);
    const report = JSON.parse(json.stdout);
    assert.equal(report.rollouts.length, 1);
    assert.equal(report.completions.length, 3);
    assert.ok(report.overall.absDiffP99 > 0.05);
  });

  test("CLI failures say what went wrong: an unreachable server, an unknown rollout, no selection", async () => {
    const down = await cli([
      "replay",
      "score",
      loaded[0]!.rollout.id,
      "--gateway",
      stack.gateway.url,
      "--upstream",
      "http://127.0.0.1:9",
    ]);
    assert.equal(down.code, 1);
    assert.match(down.stdout + down.stderr, /cannot reach the upstream at http:\/\/127\.0\.0\.1:9/);
    const unknown = await cli([
      "replay",
      "score",
      "r_nope",
      "--gateway",
      stack.gateway.url,
      "--upstream",
      stack.sim.url,
    ]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /unknown rollout 'r_nope'/);
    const none = await cli(["replay", "score", "--gateway", stack.gateway.url, "--upstream", stack.sim.url]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /select them with --group or --since/);
  });
});
