// Per-token policy versions from an update that fell mid-answer, through the RL core to a trainer, in both batch
// layouts: the call's CallInfo carries the version runs, and tokenVersions() gives every trained token its version.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { rmSync } from "node:fs";
import { promisify } from "node:util";
import { after, test } from "node:test";
import { TrainerClient, tokenVersions, type TrainingBatch } from "../clients/ts/index.ts";
import { startCore, type Core } from "../rl-core/core/index.ts";
import { answerInFlight } from "./answer-in-flight.ts";
import { trainerPython } from "./grpc-helpers.ts";
import { ROOT, createRollout, postJson, rolloutCalls, startStack, tempDir, until, type Stack } from "./helpers.ts";

const dirs: string[] = [];
const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of closers.reverse()) await close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function firstBatch(core: Core, layout: "rows" | "tree"): Promise<TrainingBatch> {
  const client = new TrainerClient(core.address);
  try {
    for await (const batch of client.batches({ layout })) return batch;
    throw new Error("the core closed the stream");
  } finally {
    client.close();
  }
}

test("an abort-mode update mid-answer: per-token versions in rows and tree batches", { timeout: 120_000 }, async () => {
  const stack: Stack = await startStack({
    sim: { seed: 3, interTokenMs: 2 },
    gateway: { prompts: "tokens", grpcPort: 0 },
  });
  closers.push(() => stack.close());
  const cores = await Promise.all(
    // A core per layout for the TypeScript client, and one per layout for the Python client (each its own group).
    (["rows", "tree", "rows", "tree"] as const).map(async (layout, i) => {
      const dir = tempDir(`policy-core-${layout}`);
      dirs.push(dir);
      const core = await startCore({
        gateways: [stack.gateway.grpc!.address],
        consumerGroup: `policy-${i}`,
        port: 0,
        metricsPort: null,
        dataDir: dir,
        layout,
        batchUnit: "rollout",
        tokenBudget: 1_000_000,
        batchTimeoutMs: 100,
      });
      closers.push(() => core.close());
      return core;
    }),
  );
  const url = stack.gateway.url;
  const rollout = await createRollout(url, { policy_version: "0" });
  // The update lands once the harness has read part of the answer.
  const answer = await answerInFlight(url, rollout.id);
  assert.equal((await postJson(`${url}/api/policy/pause`, { mode: "abort" })).status, 200);
  assert.equal((await postJson(`${url}/api/policy/resume`, { version: "1" })).status, 200);
  assert.ok(!(await answer.rest()).includes('"abort"'));
  const [call] = await rolloutCalls(url, rollout.id);
  const runs = call!.policyUpdate!.versions!;
  assert.equal(runs.length, 2);
  const cut = runs[1]!.start;
  const sampled = call!.choices[0]!.tokenIds.length;
  assert.equal((await postJson(`${url}/api/rollouts/${rollout.id}/finish`, { reward: 1 })).status, 200);
  for (const core of cores) await until(() => (core.status().batchesReady >= 1 ? true : undefined), 60_000, "a batch");

  for (const [i, layout] of (["rows", "tree"] as const).entries()) {
    const batch = await firstBatch(cores[i]!, layout);
    assert.equal(batch.layout, layout);
    const info = batch.rowInfo.flatMap((r) => r.calls).find((c) => c.seq === call!.seq)!;
    assert.deepEqual(info.versionRuns, [
      { start: 0, version: "0" },
      { start: cut, version: "1" },
    ]);
    const versions = tokenVersions(batch);
    const trained = versions.filter((_, t) => batch.lossMask[t] === 1);
    assert.deepEqual(trained, [...Array(cut).fill("0"), ...Array(sampled - cut).fill("1")], layout);
    assert.equal(versions.filter((v, t) => v === null && batch.callIndex[t]! >= 0).length, 0);
  }

  const python = trainerPython();
  if (python === null) return; // the Python view is checked where a python3 with grpcio and numpy is
  const { stdout } = await promisify(execFile)(python, ["clients/python/tests/token_versions_check.py"], {
    cwd: ROOT,
    timeout: 120_000,
    env: { ...process.env, RLGATE_CORES: `${cores[2]!.address}=rows,${cores[3]!.address}=tree` },
  });
  const seen = JSON.parse(stdout) as Record<string, string[]>;
  const expected = [...Array(cut).fill("0"), ...Array(sampled - cut).fill("1")];
  assert.deepEqual(seen["rows"], expected, "Python, rows");
  assert.deepEqual(seen["tree"], expected, "Python, tree");
});
