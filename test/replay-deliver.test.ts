// `rlgate replay deliver`: stored finished rollouts served again; a fresh core builds batches bit-equal to the ones the
// first core built from the live gateway, and deliver ends once the core's consumer group acked them all.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { TrainerClient, type TrainingBatch } from "../clients/ts/index.ts";
import { startCore, type Core, type CoreOptions } from "../rl-core/core/index.ts";
import {
  AGENT_SCRIPT,
  createRollout,
  playAgent,
  postJson,
  spawnCli,
  startStack,
  tempDir,
  until,
  type CliProcess,
  type Stack,
} from "./helpers.ts";

const coreOptions = (dataDir: string, more: Partial<CoreOptions> = {}): CoreOptions => ({
  gateways: [],
  port: 0,
  dataDir,
  batchTimeoutMs: 100,
  tokenBudget: 1_000_000,
  groupTimeoutMs: 60_000,
  ...more,
});

/** The next batch a core serves, acked. */
async function nextBatch(core: Core): Promise<TrainingBatch> {
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
  }
}

async function firstBatch(address: string, dataDir: string): Promise<TrainingBatch> {
  const core = await startCore(coreOptions(dataDir, { gateways: [address] }));
  try {
    return await nextBatch(core);
  } finally {
    await core.close();
  }
}

async function exitCode(cli: CliProcess): Promise<number> {
  const { child } = cli;
  if (child.exitCode === null) await new Promise((resolve) => child.once("exit", resolve));
  return child.exitCode!;
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
  const dir = (prefix: string) => {
    const d = tempDir(prefix);
    dirs.push(d);
    return d;
  };
  let firstRun: Promise<TrainingBatch> | null = null;
  /** The batch a core built from the live gateway, once. */
  const first = () => (firstRun ??= firstBatch(stack.gateway.grpc!.address, dir("core-first")));
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
    const original = await first();
    assert.equal(
      original.rowInfo.filter((r) => r.group === "g-deliver").length,
      original.rows,
      "the first batch is the selected group",
    );
    assert.equal(new Set(original.rowInfo.map((r) => r.rolloutId)).size, 4);

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
      const second = await firstBatch(address!, dir("core-second"));
      assert.deepEqual(content(second), content(original));
      await deliver.waitFor(/delivered: all 4 rollouts acked by rl-core/, 60_000);
      await new Promise<void>((resolve) =>
        deliver.child.exitCode !== null ? resolve() : deliver.child.once("exit", () => resolve()),
      );
      assert.equal(deliver.child.exitCode, 0, deliver.output());
    } finally {
      await deliver.kill();
    }
  });

  test("item 3: --gateway with --group reads the control API (records without their keys) and serves the same batches", async () => {
    const original = await first();
    const deliver = spawnCli([
      "replay",
      "deliver",
      "--group",
      "g-deliver",
      "--gateway",
      stack.gateway.url,
      "--grpc-port",
      "0",
    ]);
    try {
      const [, address] = await deliver.waitFor(/4 finished rollouts \(\d+ calls\) on grpc:\/\/(\S+)/, 60_000);
      const second = await firstBatch(address!, dir("core-from-gateway"));
      assert.deepEqual(content(second), content(original));
      await deliver.waitFor(/delivered: all 4 rollouts acked by rl-core/, 60_000);
      assert.equal(await exitCode(deliver), 0, deliver.output());
    } finally {
      await deliver.kill();
    }
  });

  test("item 3: --gateway with --since copies every rollout finished since", async () => {
    const res = await fetch(`${stack.gateway.url}/api/rollouts?status=ok`);
    const finished = ((await res.json()) as { rollouts: unknown[] }).rollouts.length;
    const deliver = spawnCli([
      "replay",
      "deliver",
      "--since",
      "1h",
      "--gateway",
      stack.gateway.url,
      "--grpc-port",
      "0",
    ]);
    try {
      await deliver.waitFor(new RegExp(`: ${finished} finished rollouts \\(\\d+ calls\\) on grpc://`), 60_000);
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

  test("--to-core: a fresh core (no gateway) is fed the stream and builds batches bit-equal to the first run's", async () => {
    const original = await first();
    const core = await startCore(coreOptions(dir("core-to")));
    const deliver = spawnCli([
      "replay",
      "deliver",
      "--group",
      "g-deliver",
      "--data",
      stack.dataDir,
      "--grpc-port",
      "0",
      "--to-core",
      core.address,
      "--namespace",
      "",
    ]);
    try {
      const batch = await nextBatch(core);
      assert.deepEqual(content(batch), content(original));
      await deliver.waitFor(/delivered: all 4 rollouts acked by replay \(the RL core at /, 60_000);
      assert.equal(await exitCode(deliver), 0, deliver.output());
      assert.match(deliver.output(), /reads it as consumer group 'replay', rollout ids as they are/);
    } finally {
      await deliver.kill();
      await core.close();
    }
  });

  test("--to-core: a core that trained the live rollouts takes them again under the replay namespace", async () => {
    // Its own consumer group: the live gateway delivers it every rollout from the start.
    const core = await startCore(
      coreOptions(dir("core-live"), { gateways: [stack.gateway.grpc!.address], consumerGroup: "live-again" }),
    );
    try {
      const live = await nextBatch(core);
      assert.equal(new Set(live.rowInfo.map((r) => r.rolloutId)).size, 4);
      const replay = spawnCli([
        "replay",
        "deliver",
        "--group",
        "g-deliver",
        "--data",
        stack.dataDir,
        "--grpc-port",
        "0",
        "--to-core",
        core.address,
      ]);
      try {
        // Same ids as the live rollouts the core took: without the namespace they would be skipped as duplicates.
        const again = await nextBatch(core);
        const prefixed = (b: TrainingBatch) =>
          content({
            ...b,
            rowInfo: b.rowInfo.map((r) => ({
              ...r,
              rolloutId: `replay/${r.rolloutId}`,
              group: `replay/${r.group}`,
              groupKey: r.groupKey?.replace(/^group:/, "group:replay/"),
            })),
          });
        assert.deepEqual(content(again), prefixed(live));
        await replay.waitFor(/delivered: all 4 rollouts acked by replay/, 60_000);
        assert.equal(await exitCode(replay), 0, replay.output());
      } finally {
        await replay.kill();
      }
    } finally {
      await core.close();
    }
  });

  test("--to-core: a core restarted mid-delivery ends with each rollout once", async () => {
    const data = dir("core-restart");
    // g-other has one of its two rollouts: it stays pending (unacked) in the first core until the restart.
    let core = await startCore(coreOptions(data));
    const port = core.port;
    const deliver = spawnCli([
      "replay",
      "deliver",
      "--since",
      "0",
      "--data",
      stack.dataDir,
      "--grpc-port",
      "0",
      "--to-core",
      core.address,
    ]);
    try {
      const first = core;
      await until(
        () => (first.status().rolloutsReceived >= 5 && first.status().groupsDone >= 1 ? true : undefined),
        60_000,
        "5 rollouts in",
      );
      await core.close();
      await deliver.waitFor(/is unreachable; retrying/, 60_000);
      core = await startCore(coreOptions(data, { port, groupTimeoutMs: 500 }));
      await deliver.waitFor(/did not have the source \(restarted\?\): added again/, 60_000);
      await deliver.waitFor(/delivered: all 5 rollouts acked by replay/, 60_000);
      assert.equal(await exitCode(deliver), 0, deliver.output());
      const rows: TrainingBatch["rowInfo"] = [];
      while (new Set(rows.map((r) => r.rolloutId)).size < 5) rows.push(...(await nextBatch(core)).rowInfo);
      const trajectories = rows.map((r) => `${r.rolloutId} ${r.trajectoryId}`);
      assert.equal(new Set(trajectories).size, trajectories.length, "no trajectory twice");
      assert.ok(rows.every((r) => r.rolloutId.startsWith("replay/")));
      assert.equal(new Set(rows.map((r) => r.rolloutId)).size, 5);
    } finally {
      await deliver.kill();
      await core.close();
    }
  });

  test("--to-core failures: an unreachable core, a core that refuses the token", async () => {
    const gone = await startCore(coreOptions(dir("core-gone")));
    const address = gone.address;
    await gone.close();
    const unreachable = spawnCli([
      "replay",
      "deliver",
      "--group",
      "g-deliver",
      "--data",
      stack.dataDir,
      "--grpc-port",
      "0",
      "--to-core",
      address,
    ]);
    await unreachable.waitFor(
      /rlgate: cannot reach the RL core at \S+ \(.*\): is `rlgate core` running there\?/,
      60_000,
    );
    assert.equal(await exitCode(unreachable), 1);

    const guarded = await startCore(coreOptions(dir("core-token"), { token: "right" }));
    try {
      const refused = spawnCli([
        "replay",
        "deliver",
        "--group",
        "g-deliver",
        "--data",
        stack.dataDir,
        "--grpc-port",
        "0",
        "--to-core",
        guarded.address,
        "--core-token",
        "wrong",
      ]);
      await refused.waitFor(
        /rlgate: the RL core at \S+ refused the call: .*\(give its --token as --core-token\)/,
        60_000,
      );
      assert.equal(await exitCode(refused), 1);
    } finally {
      await guarded.close();
    }
  });
});
