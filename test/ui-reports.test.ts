// What the live UI shows besides rollouts, without a browser: a trainer's logprob report reaches the gateway (the RL
// core passes its figures over the trajectory stream) as /api/agreement and an `agreement` event; `rlgate replay
// score` records its run where it read the rollouts (a gateway's control API, or a store directory) as /api/replays.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { TrainerClient } from "../clients/ts/index.ts";
import { startCore, type Core } from "../rl-core/core/index.ts";
import { startSim, type SimServer } from "../sim/index.ts";
import {
  AGENT_SCRIPT,
  collectSse,
  playAgent,
  postJson,
  runCli,
  startStack,
  tempDir,
  until,
  type Stack,
} from "./helpers.ts";

const TOKEN = "ui-reports-token";
const auth = { authorization: `Bearer ${TOKEN}` };
const get = async (stack: Stack, path: string) => {
  const res = await fetch(`${stack.gateway.url}${path}`, { headers: auth });
  return { status: res.status, json: (await res.json()) as any };
};

describe("live UI reports: agreement and replay runs", () => {
  let stack: Stack;
  let noisy: SimServer;
  let core: Core;

  before(async () => {
    stack = await startStack({ sim: { seed: 7, script: AGENT_SCRIPT }, gateway: { controlToken: TOKEN, grpcPort: 0 } });
    noisy = await startSim({ port: 0, seed: 7, script: AGENT_SCRIPT, logprobNoise: 0.3 });
    for (const harness of ["alpha", "beta"]) {
      const res = await postJson(
        `${stack.gateway.url}/api/rollouts`,
        { group: "g-reports", harness, metadata: { group_size: 2 } },
        auth,
      );
      const rollout = res.json as { id: string; key: string; base_urls: { openai: string } };
      await playAgent(rollout.base_urls.openai, AGENT_SCRIPT.length, true, { authorization: `Bearer ${rollout.key}` });
      await postJson(
        `${stack.gateway.url}/api/rollouts/${rollout.id}/finish`,
        { reward: harness === "alpha" ? 1 : 0 },
        auth,
      );
    }
    core = await startCore({
      gateways: [stack.gateway.grpc!.address],
      gatewayToken: TOKEN,
      port: 0,
      dataDir: tempDir("core-reports"),
      batchTimeoutMs: 100,
    });
  });
  after(async () => {
    await core?.close();
    await noisy?.close();
    await stack?.close();
  });

  test("a trainer's logprob report reaches the gateway: /api/agreement and an agreement event, the core's figures", async () => {
    const events = fetch(`${stack.gateway.url}/api/events`, { headers: auth });
    const trainer = new TrainerClient(core.address);
    try {
      const ac = new AbortController();
      let batch;
      for await (const b of trainer.batches({ signal: ac.signal })) {
        batch = b;
        ac.abort();
      }
      // The trainer's logprobs drift from the inference server's by a known amount on every other token.
      const mine = batch!.logprobs.map((lp, t) => (t % 2 ? lp - 0.1 : lp));
      const result = await trainer.reportLogprobs(batch!.batchId, mine, { ack: true });
      const { data } = (await collectSse(await events, (e) => e.some((x) => x.event === "agreement"))).find(
        (e) => e.event === "agreement",
      )!;
      assert.equal(data.batch_id, batch!.batchId);
      assert.deepEqual(
        data.harnesses.map((h: any) => h.harness),
        result.harnesses.map((h) => h.harness),
      );
      assert.deepEqual(
        data.harnesses.map((h: any) => h.harness),
        ["*", "alpha", "beta"],
      );
      for (const [i, h] of result.harnesses.entries()) {
        assert.equal(data.harnesses[i].tokens, h.tokens);
        assert.ok(Math.abs(data.harnesses[i].abs_diff_p99 - h.absDiffP99) < 1e-12);
        assert.ok(Math.abs(data.harnesses[i].pearson - h.pearson) < 1e-12);
        assert.ok(Math.abs(data.harnesses[i].k3_kl - h.k3Kl) < 1e-12);
      }
      assert.ok(Math.abs(data.harnesses[0].abs_diff_max - 0.1) < 1e-6, "the drift put in is the drift shown");
      const listed = await get(stack, "/api/agreement");
      assert.equal(listed.status, 200);
      assert.equal(listed.json.points.at(-1).id, data.id);
      assert.equal(listed.json.points.at(-1).core, data.core);
    } finally {
      trainer.close();
    }
  });

  test("replay score --gateway records its run there: /api/replays, a replay event, per-call figures, the verdict", async () => {
    const events = fetch(`${stack.gateway.url}/api/events`, { headers: auth });
    const run = await runCli([
      "replay",
      "score",
      "--group",
      "g-reports",
      "--upstream",
      noisy.url,
      "--gateway",
      stack.gateway.url,
      "--token",
      TOKEN,
      "--max-p99",
      "0.01",
      "--json",
    ]);
    assert.equal(run.code, 3, run.stderr);
    const report = JSON.parse(run.stdout);
    const [, id] = /replay run (\d+) recorded in the gateway at \S+ \(listed in its \/ui\)/.exec(run.stderr) ?? [];
    assert.ok(id, run.stderr);
    const { data: summary } = (await collectSse(await events, (e) => e.some((x) => x.event === "replay"))).find(
      (e) => e.event === "replay",
    )!;
    assert.equal(String(summary.id), id);
    assert.equal(summary.verdict, "drift");
    assert.equal(summary.exit_code, 3);
    assert.equal(summary.upstream, noisy.url);
    assert.equal(summary.rollouts, 2);
    assert.equal(summary.selection, "--group g-reports");
    assert.equal(summary.overall.abs_diff_p99, report.overall.absDiffP99);
    assert.equal(summary.calls, undefined, "the list and the event carry no per-call figures");
    const listed = await get(stack, "/api/replays");
    assert.equal(String(listed.json.replays.at(-1).id), id);
    const full = await get(stack, `/api/replays/${id}`);
    assert.equal(full.json.calls.length, report.completions.length);
    assert.deepEqual(
      full.json.calls.map((c: any) => [c.rollout_id, c.call_seq, c.abs_diff_p99]),
      report.completions.map((c: any) => [c.rolloutId, c.callSeq, c.agreement.absDiffP99]),
    );
    assert.equal((await get(stack, "/api/replays/12345")).status, 404);
  });

  test("replay score --data records its run in the store, where the gateway lists it; --no-record leaves none", async () => {
    const before = (await get(stack, "/api/replays")).json.replays.length;
    const run = await runCli([
      "replay",
      "score",
      "--group",
      "g-reports",
      "--upstream",
      stack.sim.url,
      "--data",
      stack.dataDir,
    ]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /replay run \d+ recorded in the store at /);
    const replays = await until(async () => {
      const { json } = await get(stack, "/api/replays");
      return json.replays.length > before ? json.replays : undefined;
    });
    const last = replays.at(-1);
    assert.equal(last.verdict, "ok");
    assert.equal(last.max_p99, null);
    assert.equal(last.overall.abs_diff_max, 0, "the same server scores its own tokens exactly");
    const quiet = await runCli([
      "replay",
      "score",
      "--group",
      "g-reports",
      "--upstream",
      stack.sim.url,
      "--gateway",
      stack.gateway.url,
      "--token",
      TOKEN,
      "--no-record",
    ]);
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.doesNotMatch(quiet.stderr, /recorded/);
    assert.equal((await get(stack, "/api/replays")).json.replays.length, before + 1);
  });

  test("failures: a malformed replay report is a 400 that names the field; no token is a 401", async () => {
    const bad = await postJson(`${stack.gateway.url}/api/replays`, { at: 1, kind: "score" }, auth);
    assert.equal(bad.status, 400);
    assert.match(bad.json.error.message, /replay report: upstream: Required/);
    const notJson = await fetch(`${stack.gateway.url}/api/replays`, { method: "POST", headers: auth, body: "{" });
    assert.equal(notJson.status, 400);
    assert.equal((await fetch(`${stack.gateway.url}/api/agreement`)).status, 401);
    assert.equal((await fetch(`${stack.gateway.url}/api/replays`)).status, 401);
  });
});
