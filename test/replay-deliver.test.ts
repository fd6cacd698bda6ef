// `rlgate replay deliver`: stored finished rollouts served again; a fresh core builds batches bit-equal to the ones the
// first core built from the live gateway, and deliver ends once the core's consumer group acked them all.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { TrainerClient, type TrainingBatch } from "../clients/ts/index.ts";
import { startCore } from "../rl-core/core/index.ts";
import {
  AGENT_SCRIPT,
  createRollout,
  playAgent,
  postJson,
  spawnCli,
  startStack,
  tempDir,
  type Stack,
} from "./helpers.ts";

async function firstBatch(address: string, dataDir: string): Promise<TrainingBatch> {
  const core = await startCore({
    gateways: [address],
    port: 0,
    dataDir,
    batchTimeoutMs: 100,
    tokenBudget: 1_000_000,
    groupTimeoutMs: 60_000,
  });
  const client = new TrainerClient(core.address, { deadlineMs: 30_000 });
  try {
    const ac = new AbortController();
    for await (const batch of client.batches({ signal: ac.signal, maxInFlight: 4 })) {
      await client.ack([batch.batchId]);
      ac.abort();
      return batch;
    }
    throw new Error("no batch");
  } finally {
    client.close();
    await core.close();
  }
}

/** Every byte of a batch that a trainer reads, as plain arrays (batch ids and creation times are the core's own). */
function content(batch: TrainingBatch) {
  return {
    rows: batch.rows,
    offsets: [...batch.offsets],
    tokenIds: [...batch.tokenIds],
    lossMask: [...batch.lossMask],
    logprobs: Buffer.from(batch.logprobs.buffer, batch.logprobs.byteOffset, batch.logprobs.byteLength).toString("hex"),
    advantages: Buffer.from(batch.advantages.buffer, batch.advantages.byteOffset, batch.advantages.byteLength).toString(
      "hex",
    ),
    lossWeights: Buffer.from(
      batch.lossWeights.buffer,
      batch.lossWeights.byteOffset,
      batch.lossWeights.byteLength,
    ).toString("hex"),
    rowInfo: batch.rowInfo,
    estimator: batch.estimator,
    groups: batch.groups,
    trainedTokens: batch.trainedTokens,
  };
}

describe("replay deliver", () => {
  let stack: Stack;
  const dirs: string[] = [];
  before(async () => {
    stack = await startStack({ sim: { script: AGENT_SCRIPT }, gateway: { grpcPort: 0 } });
    const rewards = [1, 0, 0.5, 0.25];
    for (let i = 0; i < rewards.length; i++) {
      const rollout = await createRollout(stack.gateway.url, {
        group: "g-deliver",
        harness: "scripted",
        metadata: { group_size: 4 },
      });
      await playAgent(rollout.base_urls.openai, AGENT_SCRIPT.length, i % 2 === 0);
      await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: rewards[i] });
    }
    // Another group, not selected: deliver leaves it out (it is incomplete, so the first core does not batch it either).
    const other = await createRollout(stack.gateway.url, { group: "g-other", metadata: { group_size: 2 } });
    await playAgent(other.base_urls.openai, 1, true);
    await postJson(`${stack.gateway.url}/api/rollouts/${other.id}/finish`, { reward: 1 });
  });
  after(async () => {
    await stack?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test("a fresh core fed by deliver builds batches bit-equal to the first core's, then deliver exits", async () => {
    const firstDir = tempDir("core-first");
    dirs.push(firstDir);
    const first = await firstBatch(stack.gateway.grpc!.address, firstDir);
    assert.equal(
      first.rowInfo.filter((r) => r.group === "g-deliver").length,
      first.rows,
      "the first batch is the selected group",
    );
    assert.equal(new Set(first.rowInfo.map((r) => r.rolloutId)).size, 4);

    const deliver = spawnCli([
      "replay",
      "deliver",
      "--group",
      "g-deliver",
      "--data",
      stack.dataDir,
      "--grpc-port",
      "0",
    ]);
    try {
      const [, address] = await deliver.waitFor(/4 finished rollouts \(\d+ calls\) on grpc:\/\/(\S+)/, 60_000);
      const secondDir = tempDir("core-second");
      dirs.push(secondDir);
      const second = await firstBatch(address!, secondDir);
      assert.deepEqual(content(second), content(first));
      await deliver.waitFor(/delivered: all 4 rollouts acked by rl-core/, 60_000);
      await new Promise<void>((resolve) =>
        deliver.child.exitCode !== null ? resolve() : deliver.child.once("exit", () => resolve()),
      );
      assert.equal(deliver.child.exitCode, 0, deliver.output());
    } finally {
      await deliver.kill();
    }
  });

  test("failures: an open rollout is refused, an empty selection says so", async () => {
    const open = await createRollout(stack.gateway.url, { group: "g-open" });
    const refused = spawnCli(["replay", "deliver", open.id, "--data", stack.dataDir, "--grpc-port", "0"]);
    await refused.waitFor(/rlgate: rollout .* is still open: only finished rollouts are delivered/, 60_000);
    await refused.kill();
    const none = spawnCli(["replay", "deliver", "--group", "g-none", "--data", stack.dataDir, "--grpc-port", "0"]);
    await none.waitFor(/rlgate: no finished rollout in the store at .* matches the selection/, 60_000);
    await none.kill();
  });
});
