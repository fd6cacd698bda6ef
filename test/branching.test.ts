// Branch rollouts at the gateway (gateway/branching): a branch's calls before its decision point are answered with the
// backbone's recorded answers (no upstream call, same ids), checked against the backbone's prompts; a call that
// differs is a divergence, handled as the branch says (sample on, or drop); at the point the call goes to the model
// with the branch's seed, and the branch's trajectory trains only what it sampled itself.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { rmSync } from "node:fs";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { startCore } from "../rl-core/core/index.ts";
import { trainerPython } from "./grpc-helpers.ts";
import { finish, runAgent, scriptedBackbones, stableTool, type Message } from "./branching-agent.ts";
import {
  AGENT_SCRIPT,
  createRollout,
  postJson,
  ROOT,
  rolloutCalls,
  startStack,
  tempDir,
  until,
  type Stack,
} from "./helpers.ts";
import { requireInCi } from "./require-in-ci.ts";

const python = trainerPython();

async function rollout(url: string, id: string): Promise<any> {
  return (await fetch(`${url}/api/rollouts/${id}`)).json();
}

describe("branch rollouts at the gateway (messages mode, scripted model)", () => {
  let stack: Stack;
  let url: string;
  let backbones: Record<string, { id: string; answers: Message[] }> = {};

  before(async () => {
    stack = await startStack({ sim: { script: AGENT_SCRIPT } });
    url = stack.gateway.url;
    backbones = await scriptedBackbones(url);
  });
  after(() => stack.close());

  for (const stream of [false, true]) {
    test(`${stream ? "streamed" : "whole"}: calls before the point are the backbone's answers, no upstream call; the point is sampled`, async () => {
      const backbone = backbones[String(stream)]!;
      const branch = await createRollout(url, { group: "g", branch: { of: backbone.id, at_call: 2, seed: 7 } });
      const before = stack.sim.stats.requests;
      const run = await runAgent(branch.base_urls.openai, stableTool, { stream });
      assert.equal(run.status, 200, run.error);
      assert.equal(stack.sim.stats.requests - before, 1, "only the decision call went upstream");
      // Same answers, tool-call ids included, as the backbone's harness got them.
      assert.deepEqual(run.answers.slice(0, 2), backbone.answers.slice(0, 2));
      const calls = await rolloutCalls(url, branch.id);
      const base = await rolloutCalls(url, backbone.id);
      assert.equal(calls.length, 3);
      assert.deepEqual(
        calls.map((c) => c.replayOf?.seq ?? null),
        [base[0]!.seq, base[1]!.seq, null],
      );
      for (let i = 0; i < 2; i++) {
        // Context here: the backbone's prompt and its sampled answer; nothing sampled by the branch.
        assert.deepEqual(calls[i]!.promptTokenIds, [...base[i]!.promptTokenIds!, ...base[i]!.choices[0]!.tokenIds]);
        assert.deepEqual(calls[i]!.choices[0]!.tokenIds, []);
      }
      // The decision call saw exactly the backbone's prompt, and carried the branch's seed upstream.
      assert.deepEqual(calls[2]!.promptTokenIds, base[2]!.promptTokenIds);
      assert.equal((calls[2]!.requestForwarded as any).seed, 7);
      await finish(url, branch.id, 0);
      const trajs = (await (await fetch(`${url}/api/rollouts/${branch.id}/trajectories`)).json()) as any;
      const trained = trajs.trajectories.reduce(
        (n: number, t: any) => n + t.loss_mask.reduce((a: number, b: number) => a + b, 0),
        0,
      );
      assert.equal(trained, base[2]!.choices[0]!.tokenIds.length, "only the decision call's tokens are trained");
    });
  }

  test("a tool whose output changed: divergence recorded; drop refuses the call, sample goes on upstream", async () => {
    const backbone = backbones["false"]!;
    const changed = (turn: number) => (turn === 0 ? "another listing" : stableTool(turn));
    const dropped = await createRollout(url, { branch: { of: backbone.id, at_call: 2, on_divergence: "drop" } });
    const before = stack.sim.stats.requests;
    const run = await runAgent(dropped.base_urls.openai, changed);
    assert.equal(run.status, 409, run.error);
    assert.match(run.error!, /diverged/);
    assert.equal(stack.sim.stats.requests, before, "a dropped branch sends nothing upstream");
    const div = (await rollout(url, dropped.id)).metadata.branch.divergence;
    assert.equal(div.at, 1);
    assert.equal(div.action, "drop");
    assert.match(div.reason, /messages' differs at item 3/);

    const sampled = await createRollout(url, { branch: { of: backbone.id, at_call: 2, on_divergence: "sample" } });
    const run2 = await runAgent(sampled.base_urls.openai, changed);
    assert.equal(run2.status, 200, run2.error);
    assert.equal(stack.sim.stats.requests - before, 2, "calls 1 and 2 sampled anew");
    assert.equal((await rollout(url, sampled.id)).metadata.branch.divergence.action, "sample");
    const calls = await rolloutCalls(url, sampled.id);
    assert.deepEqual(
      calls.map((c) => Boolean(c.replayOf)),
      [true, false, false],
    );
  });

  test("refused branches: unknown or open backbone, a point past its calls, a branch of a branch", async () => {
    const open = await createRollout(url, {});
    const cases: Array<[unknown, RegExp]> = [
      [{ of: "nope", at_call: 0 }, /unknown backbone/],
      [{ of: open.id, at_call: 0 }, /still open/],
      [{ of: backbones["false"]!.id, at_call: 3 }, /past the backbone's 3 replayable/],
    ];
    for (const [branch, message] of cases) {
      const r = await postJson(`${url}/api/rollouts`, { branch });
      assert.equal(r.status, 400);
      assert.match(r.json.error.message, message);
    }
    const child = await createRollout(url, { branch: { of: backbones["false"]!.id, at_call: 0 } });
    await finish(url, child.id, 0);
    const r = await postJson(`${url}/api/rollouts`, { branch: { of: child.id, at_call: 0 } });
    assert.match(r.json.error.message, /itself a branch/);
    // A create retried with PUT answers the same branch again; another point under that id is a conflict.
    const put = (at: number) =>
      fetch(`${url}/api/rollouts/branch-put`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ branch: { of: backbones["false"]!.id, at_call: at } }),
      }).then((res) => res.status);
    assert.deepEqual([await put(1), await put(1), await put(2)], [201, 200, 409]);
  });
});

describe("branch rollouts in tokens mode (the sim's own policy, seeded)", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { seed: 3 }, gateway: { prompts: "tokens" } });
  });
  after(() => stack.close());

  test("the decision call continues from the backbone's exact ids and samples anew with the branch's seed", async () => {
    const url = stack.gateway.url;
    const backbone = await createRollout(url, {});
    const run = await runAgent(backbone.base_urls.openai, stableTool);
    assert.equal(run.answers.length, 2);
    await finish(url, backbone.id, 1);
    const base = await rolloutCalls(url, backbone.id);
    // Seeds whose sampled wording differs from the backbone's at call 1 (the sim draws one of four wordings).
    const seen = new Set<string>([base[1]!.choices[0]!.tokenIds.join(",")]);
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const branch = await createRollout(url, { branch: { of: backbone.id, at_call: 1, seed } });
      const before = stack.sim.stats.requests;
      const got = await runAgent(branch.base_urls.openai, stableTool);
      assert.equal(got.status, 200, got.error);
      assert.equal(stack.sim.stats.requests - before, 1);
      const calls = await rolloutCalls(url, branch.id);
      assert.equal(calls[0]!.replayOf?.seq, base[0]!.seq);
      assert.deepEqual(calls[1]!.promptTokenIds, base[1]!.promptTokenIds, "the thread continued from the replayed ids");
      assert.equal((calls[1]!.requestForwarded as any).seed, seed);
      seen.add(calls[1]!.choices[0]!.tokenIds.join(","));
    }
    assert.ok(seen.size > 1, "the branches sampled other answers than the backbone's");
  });
});

describe(
  "a backbone and its branches: one group, one tree",
  { skip: requireInCi("python3-grpcio python3-numpy", python ? null : "no /usr/bin/python3 with grpc and numpy") },
  () => {
    for (const estimator of ["tree", "branch-grpo"] as const)
      test(`the RL core's ${estimator} advantages equal an independent NumPy recomputation`, async () => {
        const stack = await startStack({ sim: { seed: 11 }, gateway: { grpcPort: 0 } });
        const coreDir = tempDir("branch-core");
        const core = await startCore({
          gateways: [stack.gateway.grpc!.address],
          port: 0,
          metricsPort: null,
          dataDir: coreDir,
          estimator,
          batchUnit: "group",
          tokenBudget: 1_000_000,
          batchTimeoutMs: 200,
          groupTimeoutMs: 60_000,
        });
        try {
          const url = stack.gateway.url;
          const group = { group: "task", metadata: { group_size: 4 } };
          const backbone = await createRollout(url, group);
          await runAgent(backbone.base_urls.openai, stableTool);
          // Rewards far from 0 (1e6 + …): a spread read off E[r²] − E[r]² would be lost to rounding there.
          const base = 1e6;
          await finish(url, backbone.id, base + 1);
          // Branches at both calls; rewards spread so that the tree's nodes have values of their own.
          for (const [at, seed, reward] of [
            [0, 1, 0],
            [1, 2, 0.5],
            [1, 3, 0.25],
          ] as const) {
            const b = await createRollout(url, { ...group, branch: { of: backbone.id, at_call: at, seed } });
            assert.equal((await runAgent(b.base_urls.openai, stableTool)).status, 200);
            await finish(url, b.id, base + reward);
          }
          await until(() => (core.status().groupsDone >= 1 ? true : undefined), 60_000, "the group");
          await core.flush();
          const { stdout } = await promisify(execFile)(
            python!,
            ["test/e2e/numpy_reference.py", "--core", core.address, "--estimator", estimator, "--batches", "1"],
            { cwd: ROOT, timeout: 120_000 },
          );
          const ref = JSON.parse(stdout);
          assert.equal(ref.rows, 4, stdout);
          assert.ok(ref.max_abs_diff_advantages < 1e-6, stdout);
        } finally {
          await core.close();
          await stack.close();
          rmSync(coreDir, { recursive: true, force: true });
        }
      });
  },
);
