// Issue 22 end to end: rollouts driven through the gateway and the simulated vLLM, finished in random orders and
// bursts while the RL core is killed and restarted, some never finished by their harness (the gateway's deadline
// ends them): the groups and advantages the core serves equal a reference computed from the declared
// (name, round, size) alone. And a live run whose core processed a group at its timeout and cut batches at the batch
// timeout is replayed bit for bit by a core that follows the live core's recorded decisions.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, test } from "node:test";
import { seededRandom } from "../util/seeded-random.ts";
import { TrainerClient, type TrainingBatch } from "../clients/ts/index.ts";
import { startCore, type Core, type CoreOptions } from "../rl-core/core/index.ts";
import { createRollout, playAgent, postJson, spawnCli, startStack, tempDir, until, type Stack } from "./helpers.ts";

function shuffle<T>(items: T[], rand: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/** Every batch the core has (stored until acked, across restarts), acked, until `enough` says so. */
async function drainBatches(core: Core, enough: (batches: TrainingBatch[]) => boolean): Promise<TrainingBatch[]> {
  const client = new TrainerClient(core.address, { deadlineMs: 30_000 });
  const batches: TrainingBatch[] = [];
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 60_000);
  try {
    for await (const batch of client.batches({ signal: ac.signal, maxInFlight: 8 })) {
      batches.push(batch);
      await client.ack([batch.batchId]);
      if (enough(batches)) break;
    }
  } finally {
    clearTimeout(timer);
    ac.abort();
    client.close();
  }
  assert.ok(enough(batches), `only ${batches.length} batches came`);
  return batches;
}

const hex = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString("hex");

/** Every byte of a batch a trainer reads (creation time aside: the core's clock). */
function content(batch: TrainingBatch) {
  return {
    batchId: batch.batchId,
    rows: batch.rows,
    offsets: hex(batch.offsets),
    tokenIds: hex(batch.tokenIds),
    lossMask: hex(batch.lossMask),
    logprobs: hex(batch.logprobs),
    advantages: hex(batch.advantages),
    lossWeights: hex(batch.lossWeights),
    rowInfo: batch.rowInfo,
    estimator: batch.estimator,
    groups: batch.groups,
    trainedTokens: batch.trainedTokens,
  };
}

describe("issue 22: groups exact under any timing, through the gateway and core", () => {
  const dirs: string[] = [];
  const dir = (prefix: string) => {
    const d = tempDir(prefix);
    dirs.push(d);
    return d;
  };
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  for (const [seed, explicitRounds] of [
    [1, true],
    [2, false],
    [3, true],
  ] as const) {
    test(`property (seed ${seed}, ${explicitRounds ? "explicit rounds" : "fill order"}): random finish orders, bursts, core restarts and rollouts that never finish give the groups of (name, round, size)`, async () => {
      const rand = seededRandom(seed);
      const stack: Stack = await startStack({ gateway: { grpcPort: 0 } });
      const coreData = dir("core-exact");
      const options: CoreOptions = {
        gateways: [stack.gateway.grpc!.address],
        port: 0,
        dataDir: coreData,
        estimator: "dr-grpo",
        batchTimeoutMs: 50,
        groupTimeoutMs: 120_000,
        tokenBudget: 1_000_000,
      };
      let core: Core | null = null;
      try {
        const size = 3;
        const rollouts: Array<{ id: string; name: string; round: number; reward: number | null }> = [];
        for (const name of ["task-a", "task-b"]) {
          for (let round = 1; round <= 2; round++) {
            for (let k = 0; k < size; k++) {
              const never = rand() < 0.12; // a harness that died: the gateway's deadline ends it
              const created = await createRollout(stack.gateway.url, {
                group: name,
                metadata: { group_size: size },
                ...(explicitRounds ? { round } : {}),
                ...(never ? { deadline_s: 1 } : {}),
              });
              await playAgent(created.base_urls.openai, 1, true);
              rollouts.push({ id: created.id, name, round, reward: never ? null : Math.floor(rand() * 4) });
            }
          }
        }
        // Explicit rounds: any finish order. Fill order: each name's rounds finish one after the other (the
        // stream order is what defines them), each round's rollouts in random order and bursts.
        const toFinish = rollouts.filter((r) => r.reward !== null);
        const order = explicitRounds
          ? shuffle([...toFinish], rand)
          : ["task-a", "task-b"].flatMap((name) =>
              [1, 2].flatMap((round) =>
                shuffle(
                  toFinish.filter((r) => r.name === name && r.round === round),
                  rand,
                ),
              ),
            );
        core = await startCore(options);
        for (let i = 0; i < order.length;) {
          const burst = order.slice(i, i + 1 + Math.floor(rand() * 4));
          i += burst.length;
          await Promise.all(
            burst.map((r) => postJson(`${stack.gateway.url}/api/rollouts/${r.id}/finish`, { reward: r.reward })),
          );
          if (rand() < 0.35) {
            // A kill of the core between bursts (its store and the gateway's leases carry it over).
            await core.close();
            core = await startCore(options);
          }
        }
        const reward = new Map(rollouts.map((r) => [r.id, r.reward]));
        const finishedLog = async () => {
          const res = await fetch(`${stack.gateway.url}/api/rollouts?limit=1000`);
          const all = ((await res.json()) as { rollouts: Array<{ id: string; status: string; finish_cursor: number }> })
            .rollouts;
          return all;
        };
        // Every rollout ends: those never finished by their harness are finished as timeout by the gateway.
        await until(
          async () => ((await finishedLog()).every((r) => r.status !== "open") ? true : undefined),
          30_000,
          "every rollout finished",
        );
        // The reference: membership from (name, round, size) — for fill order, the round is the position in the
        // gateway's finished log of the name over the size.
        const log = (await finishedLog()).sort((a, b) => a.finish_cursor - b.finish_cursor);
        const expected = new Map<string, string>(); // rollout id → generation key
        const position = new Map<string, number>();
        for (const entry of log) {
          const r = rollouts.find((x) => x.id === entry.id)!;
          const k = position.get(r.name) ?? 0;
          position.set(r.name, k + 1);
          expected.set(r.id, explicitRounds ? `${r.name}@${r.round}` : `${r.name}#${Math.floor(k / size) + 1}`);
        }
        const members = new Map<string, string[]>();
        for (const [id, key] of expected) members.set(key, [...(members.get(key) ?? []), id]);
        for (const ids of members.values()) assert.equal(ids.length, size);
        const trainedRollouts = rollouts.filter((r) => r.reward !== null).length;
        const batches = await drainBatches(
          core,
          (got) => new Set(got.flatMap((b) => b.rowInfo.map((i) => i.rolloutId))).size >= trainedRollouts,
        );
        const seen = new Set<string>();
        for (const batch of batches) {
          batch.rowInfo.forEach((info, row) => {
            const key = expected.get(info.rolloutId)!;
            assert.equal(seen.has(info.trajectoryId), false, `${info.trajectoryId} served twice`);
            seen.add(info.trajectoryId);
            assert.equal(info.late, false, `${info.rolloutId} late`);
            assert.equal(info.groupKey, `group:${key}`, "the group key a trainer groups by");
            assert.equal(info.group, key.split(/[#@]/)[0]);
            assert.equal(info.generation, Number(key.split(/[#@]/)[1]));
            assert.equal(info.round, explicitRounds ? info.generation : 0);
            // Dr.GRPO: r − the mean of the rewards of the group's rollouts that have one (timeouts have none).
            const rewards = members
              .get(key)!
              .map((id) => reward.get(id))
              .filter((x): x is number => x !== null && x !== undefined);
            const mean = rewards.reduce((s, x) => s + x, 0) / rewards.length;
            const want = Math.fround(info.reward - mean);
            for (let t = batch.offsets[row]!; t < batch.offsets[row + 1]!; t++)
              if (batch.lossMask[t]) assert.equal(batch.advantages[t], want, `${info.rolloutId} token ${t}`);
          });
        }
        const status = core.status();
        assert.equal(status.rolloutsLate, 0);
        assert.equal(status.rolloutsDropped["no_reward"] ?? 0, rollouts.length - trainedRollouts);
      } finally {
        await core?.close();
        await stack.close();
      }
    });
  }

  test("issue 22 item 2: replay deliver is bit-equal on a live run that had a group timeout and batch timeouts", async () => {
    const stack = await startStack({ gateway: { grpcPort: 0 } });
    const liveData = dir("core-live");
    const settings: Omit<CoreOptions, "gateways" | "dataDir"> = {
      port: 0,
      estimator: "grpo",
      groupTimeoutMs: 1000,
      batchTimeoutMs: 150,
      tokenBudget: 1_000_000,
    };
    let deliver: ReturnType<typeof spawnCli> | null = null;
    try {
      const make = async (group: string, n: number) => {
        const ids: string[] = [];
        for (let i = 0; i < n; i++) {
          const r = await createRollout(stack.gateway.url, { group, metadata: { group_size: n } });
          await playAgent(r.base_urls.openai, 1 + (i % 2), true);
          ids.push(r.id);
        }
        return ids;
      };
      const finish = (id: string, reward: number) =>
        postJson(`${stack.gateway.url}/api/rollouts/${id}/finish`, { reward });
      const slow = await make("slow", 3);
      const quick = await make("quick", 2);
      const burst = await make("burst", 4);
      const live = await startCore({ ...settings, gateways: [stack.gateway.grpc!.address], dataDir: liveData });
      let liveBatches: TrainingBatch[];
      try {
        await finish(slow[0]!, 1);
        await finish(slow[1]!, 0);
        // The live core takes "slow" at its group timeout with 2 of 3; the third is then its late part.
        await until(() => (live.status().groupsDone >= 1 ? true : undefined), 10_000, "slow processed at timeout");
        await until(() => (live.status().batchesReady >= 1 ? true : undefined), 10_000, "its batch cut at the timeout");
        await finish(slow[2]!, 0.5);
        await finish(quick[0]!, 1);
        await new Promise((r) => setTimeout(r, 300)); // a batch timeout falls between these two groups
        await finish(quick[1]!, 0);
        await Promise.all(burst.map((id, i) => finish(id, i / 3)));
        liveBatches = await drainBatches(
          live,
          (got) => new Set(got.flatMap((b) => b.rowInfo.map((i) => i.rolloutId))).size >= 9,
        );
        // What the clock decided varies with the machine's load (how many of "slow" made its timeout, where the
        // batch timeouts fell); that it decided something is certain: "slow" was taken before its third rollout
        // finished, and a batch was cut before that. The replay must reproduce whatever it was.
        const layout = JSON.stringify(liveBatches.map((b) => b.rowInfo.map((i) => i.groupKey)));
        assert.ok(liveBatches.length >= 2, `live batches: ${layout}`);
        const late = liveBatches.flatMap((b) => b.rowInfo).filter((i) => i.late);
        assert.ok(
          late.some((i) => i.rolloutId === slow[2] && i.groupKey === "group:slow#1+late"),
          `the slow group's third rollout is in its late part: ${layout}`,
        );
      } finally {
        await live.close();
      }

      deliver = spawnCli(["replay", "deliver", "--since", "0", "--data", stack.dataDir, "--grpc-port", "0"]);
      const [, address] = await deliver.waitFor(/9 finished rollouts \(\d+ calls\) on grpc:\/\/(\S+)/, 60_000);
      const follower = await startCore({
        ...settings,
        gateways: [address!],
        dataDir: dir("core-follow"),
        followDecisions: liveData,
      });
      try {
        const replayed = await drainBatches(follower, (got) => got.length >= liveBatches.length);
        assert.deepEqual(replayed.map(content), liveBatches.map(content));
      } finally {
        await follower.close();
      }
      await deliver.waitFor(/delivered: all 9 rollouts acked by rl-core/, 60_000);
    } finally {
      await deliver?.kill();
      await stack.close();
    }
  });
});
