// The RL core's pieces without the network: the prefix tree rebuilt from trajectories, group advantages (drops,
// one sample per rollout, tree), batch packing by a token budget, and consistency figures.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { computeAdvantages, GRPO_EPS } from "../estimators/index.ts";
import { bytesOf, float32s, int32s, uint8s } from "../../protocol/index.ts";
import { BatchPacker, buildBatch } from "./batch-packer.ts";
import { percentile } from "../../util/agreement.ts";
import { consistencyFigures } from "./consistency.ts";
import { CoreStore, type ReadyRow } from "./core-store.ts";
import { groupAdvantages } from "./group-advantages.ts";
import { declaredGroupSize, GroupTracker } from "./groups.ts";
import { buildTreeSpec } from "./tree-spec.ts";
import { pending, readyRow, type Row } from "./test-support.ts";

const grpo = (rewards: number[]) => {
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  const std = Math.sqrt(rewards.reduce((a, b) => a + (b - mean) ** 2, 0) / (rewards.length - 1));
  return rewards.map((r) => (r - mean) / (std + GRPO_EPS));
};

function trainedAdvantages(row: ReadyRow): number[] {
  const mask = uint8s(row.lossMask);
  return [...float32s(row.advantages)].filter((_, i) => mask[i] === 1);
}

describe("buildTreeSpec", () => {
  test("rebuilds the branch points of a rollout's trajectories; separate rollouts are separate trees", () => {
    const rows = [Int32Array.of(1, 2, 3, 4), Int32Array.of(1, 2, 5, 6), Int32Array.of(1, 2, 5, 7), Int32Array.of(9, 9)];
    const spec = buildTreeSpec(rows, [0, 0, 0, 1]);
    for (let i = 0; i < spec.parent.length; i++) assert.ok(spec.parent[i]! < i);
    const node = (r: number, t: number) => spec.tokenNode[[0, 4, 8, 12][r]! + t]!;
    // The shared prefix [1, 2] is one node, the root of rollout 0.
    assert.equal(node(0, 0), node(1, 1));
    assert.equal(spec.parent[node(0, 0)], -1);
    // [5] is shared by rows 1 and 2 below the root; 6 and 7 are leaves under it.
    assert.equal(node(1, 2), node(2, 2));
    assert.equal(spec.parent[node(1, 2)], node(0, 0));
    assert.equal(spec.rowLeaf[1], node(1, 3));
    assert.equal(spec.parent[spec.rowLeaf[1]!], node(1, 2));
    assert.equal(spec.parent[spec.rowLeaf[0]!], node(0, 0));
    // Rollout 1 is its own root.
    assert.equal(spec.parent[spec.rowLeaf[3]!], -1);
    assert.equal(new Set(spec.rowLeaf).size, 4);
  });
});

describe("groupAdvantages", () => {
  test("GRPO over a group: infra_error, flagged and reward-less rollouts are dropped from statistics and loss", async () => {
    const rows = (seed: number): Row[] => [{ ids: [seed, seed + 1, seed + 2, seed + 3], mask: [0, 1, 1, 0] }];
    const result = await groupAdvantages(
      [
        pending("a", 1, rows(10)),
        pending("b", 0, rows(20)),
        pending("c", 0.5, rows(30)),
        pending("d", null, rows(40), { status: "infra_error" }),
        pending("e", 5, rows(50), { flagged: true, flagReasons: ["missing logprobs"] }),
        pending("f", null, rows(60), { status: "timeout" }),
      ],
      { estimator: "grpo" },
    );
    assert.deepEqual(
      result.dropped.map((d) => `${d.rolloutId}:${d.reason}`),
      ["d:infra_error", "e:flagged", "f:no_reward"],
    );
    assert.deepEqual(
      result.rows.map((r) => r.rolloutId),
      ["a", "b", "c"],
    );
    const expected = grpo([1, 0, 0.5]);
    result.rows.forEach((row, i) => {
      for (const a of trainedAdvantages(row)) assert.ok(Math.abs(a - expected[i]!) < 1e-5, `${a} vs ${expected[i]}`);
      const adv = float32s(row.advantages);
      assert.equal(adv[0], 0);
      assert.equal(adv[3], 0);
    });
  });

  test("a rollout with several trajectories is one sample of its group, and its advantage reaches all of them", async () => {
    const x = pending("x", 1, [
      { ids: [1, 2, 3], mask: [0, 1, 1] },
      { ids: [1, 2, 4, 5], mask: [0, 0, 1, 1] },
    ]);
    const y = pending("y", 0, [{ ids: [7, 8, 9], mask: [0, 1, 1] }]);
    const result = await groupAdvantages([x, y], { estimator: "grpo" });
    assert.equal(result.rows.length, 3);
    const [ax, ay] = grpo([1, 0]);
    for (const row of result.rows) {
      for (const a of trainedAdvantages(row)) assert.ok(Math.abs(a - (row.rolloutId === "x" ? ax! : ay!)) < 1e-5);
    }
  });

  test("tree estimator: rollouts sharing sampled tokens branch in one group tree; without branching it is twice Dr.GRPO", async () => {
    const flat = await groupAdvantages(
      [pending("a", 1, [{ ids: [1, 2, 3], mask: [0, 1, 1] }]), pending("b", 0, [{ ids: [1, 2, 4], mask: [0, 1, 1] }])],
      { estimator: "tree" },
    );
    // [1, 2] is shared by both rollouts (its sampled token 2 is the root's: V = the group mean, advantage 0).
    assert.deepEqual(
      flat.rows.map((r) => trainedAdvantages(r)),
      [
        [0, 1],
        [0, -1],
      ],
    );

    // Rollouts a and c share a sampled prefix [1, 2] and branch; b is apart: the reference on the hand-built tree,
    // V over rollouts (here one leaf each).
    const a = pending("a", 1, [{ ids: [1, 2, 3], mask: [0, 1, 1] }]);
    const c = pending("c", 0.5, [{ ids: [1, 2, 4], mask: [0, 1, 1] }]);
    const b = pending("b", 0, [{ ids: [5, 6], mask: [0, 1] }]);
    const result = await groupAdvantages([a, b, c], { estimator: "tree" });
    const reference = computeAdvantages(
      {
        offsets: Int32Array.of(0, 3, 5, 8),
        lossMask: Uint8Array.of(0, 1, 1, 0, 1, 0, 1, 1),
        rewards: Float64Array.of(1, 0, 0.5),
        groupIds: new Int32Array(3),
      },
      {
        estimator: "tree",
        // nodes: 0 = [1,2] (a and c), 1 = [3], 2 = [4], 3 = [5,6] (b)
        tree: {
          parent: Int32Array.of(-1, 0, 0, -1),
          tokenNode: Int32Array.of(0, 0, 1, 3, 3, 0, 0, 2),
          rowLeaf: Int32Array.of(1, 3, 2),
        },
      },
    );
    const got = result.rows.flatMap((r) => [...float32s(r.advantages)]);
    assert.deepEqual(got, [...reference.advantages]);
  });
});

describe("GroupTracker", () => {
  const arrive = (tracker: GroupTracker, id: string, group: string, size: number, at: number) => {
    const a = tracker.assign(group, id, size);
    return tracker.add(
      pending(id, 1, [], {
        groupKey: a.key,
        group,
        generation: a.generation,
        late: a.late,
        declaredSize: a.size,
        receivedAt: at,
      }),
    );
  };

  test("a generation completes at its declared size, else at the timeout; a rollout without a group is a group of one", () => {
    assert.equal(declaredGroupSize({ group_size: 4 }), 4);
    assert.equal(declaredGroupSize({ groupSize: "4" }), 0);
    const tracker = new GroupTracker({ defaultSize: 0, timeoutMs: 1000 });
    const t0 = 1_000_000;
    const g = arrive(tracker, "a", "g", 2, t0);
    assert.equal(tracker.isComplete(g), false);
    arrive(tracker, "b", "g", 0, t0 + 10);
    assert.deepEqual(tracker.due(t0 + 20), [{ key: "group:g#1", by: "size" }]);
    tracker.take("group:g#1");
    arrive(tracker, "c", "h", 0, t0);
    assert.deepEqual(tracker.due(t0 + 999), []);
    assert.deepEqual(tracker.due(t0 + 1000), [{ key: "group:h#1", by: "timeout" }]);
    const single = arrive(tracker, "d", "", 0, t0);
    assert.equal(single.key, "rollout:d");
    assert.equal(tracker.isComplete(single), true);
  });
});

describe("BatchPacker", () => {
  test("packs whole rows up to the token budget, a longer row alone, and loss weights per batch", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rlgate-core-test-"));
    const store = new CoreStore(dir);
    try {
      const row = (n: number, id: string): ReadyRow =>
        readyRow({
          rolloutId: id,
          trajectoryId: `${id}:0`,
          groupKey: "group:g",
          group: "g",
          task: "t",
          harness: "h",
          reward: 1,
          segment: "main",
          tokenIds: bytesOf(Int32Array.from({ length: n }, (_, i) => i)),
          lossMask: bytesOf(Uint8Array.from({ length: n }, (_, i) => (i % 2 ? 1 : 0))),
          logprobs: bytesOf(new Float32Array(n).fill(-1)),
          advantages: bytesOf(new Float32Array(n).fill(0.5)),
        });
      const rows = [row(4, "a"), row(4, "b"), row(4, "c"), row(20, "d"), row(2, "e")];
      const keys = await store.commitGroup(
        "group:g",
        ["a", "b", "c", "d", "e"],
        rows,
        { name: null, generation: null },
        { kind: "group", key: "group:g", members: ["a", "b", "c", "d", "e"], by: "size", at: 0 },
      );
      const packer = new BatchPacker(store, {
        tokenBudget: 10,
        batchTimeoutMs: 60_000,
        normalize: "none",
        lossAgg: "seq-mean-token-mean",
        estimator: "grpo",
      });
      assert.equal(packer.readyRows, 5);
      assert.deepEqual(keys.length, 5);
      const built = await packer.pack();
      assert.deepEqual(
        built.map((b) => b.rowInfo.map((r) => r.rolloutId)),
        [["a", "b"], ["c"], ["d"]],
      );
      assert.equal(packer.readyRows, 1); // "e" waits for more rows or the batch timeout
      const rest = await packer.pack({ flush: true });
      assert.deepEqual(
        rest.map((b) => [b.rows, b.tokens]),
        [[1, 2]],
      );
      const first = built[0]!;
      assert.deepEqual([...int32s(first.offsets)], [0, 4, 8]);
      const weights = float32s(first.lossWeights);
      // seq-mean-token-mean: 2 rows of 2 trained tokens each → 1/4 per trained token.
      assert.deepEqual([...weights], [0, 0.25, 0, 0.25, 0, 0.25, 0, 0.25]);
      assert.equal(first.trainedTokens, 4);
      assert.deepEqual(
        store.batchIds(),
        [...built, ...rest].map((b) => b.batchId),
      );
      assert.equal(store.readyKeys().length, 0);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("buildBatch", () => {
  test("--normalize harness whitens each harness's trained tokens within the batch", async () => {
    const row = (harness: string, adv: number[]): ReadyRow =>
      readyRow({
        rolloutId: harness + adv[0],
        trajectoryId: "x",
        groupKey: "group:g",
        group: "g",
        task: "t",
        harness,
        reward: 0,
        segment: "main",
        tokenIds: bytesOf(new Int32Array(adv.length)),
        lossMask: bytesOf(Uint8Array.from(adv, (_, i) => (i === 0 ? 0 : 1))),
        logprobs: bytesOf(new Float32Array(adv.length)),
        advantages: bytesOf(Float32Array.from(adv)),
      });
    const batch = await buildBatch(7, [row("a", [9, 1, 3]), row("b", [9, 100, 300]), row("a", [9, 5])], {
      normalize: "harness",
      lossAgg: "token-mean",
      estimator: "grpo",
    });
    const adv = float32s(batch.advantages);
    const mask = uint8s(batch.lossMask);
    const offsets = int32s(batch.offsets);
    for (const [harness, rows] of [
      ["a", [0, 2]],
      ["b", [1]],
    ] as const) {
      const values = rows.flatMap((r) =>
        [...adv.subarray(offsets[r]!, offsets[r + 1]!)].filter((_, i) => mask[offsets[r]! + i]),
      );
      const mean = values.reduce((x, y) => x + y, 0) / values.length;
      assert.ok(Math.abs(mean) < 1e-5, `harness ${harness} mean ${mean}`);
      if (values.length > 2) {
        const std = Math.sqrt(values.reduce((x, y) => x + (y - mean) ** 2, 0) / (values.length - 1));
        assert.ok(Math.abs(std - 1) < 1e-4, `harness ${harness} std ${std}`);
      }
    }
    assert.equal(adv[0], 0, "context tokens stay 0");
    assert.equal(batch.batchId, 7);
  });
});

describe("consistencyFigures", () => {
  test("Pearson r, k3 KL and |Δlogp| quantiles per harness over trained tokens with finite logprobs", () => {
    const rollout = Float32Array.of(-1, -2, -3, -0.5, -4, NaN, -1);
    const trainer = Float32Array.of(-1.1, -2, -2.9, -0.5, -4.2, -1, 99);
    const lossMask = Uint8Array.of(1, 1, 1, 1, 1, 1, 0);
    const [all, a, b] = consistencyFigures({
      offsets: Int32Array.of(0, 3, 7),
      lossMask,
      rollout,
      trainer,
      harness: ["a", "b"],
    });
    assert.equal(all!.harness, "*");
    assert.equal(all!.tokens, 5); // NaN and mask-0 left out
    assert.equal(a!.tokens, 3);
    assert.equal(b!.tokens, 2);
    const xs = [-1, -2, -3, -0.5, -4].map(Math.fround);
    const ys = [-1.1, -2, -2.9, -0.5, -4.2].map(Math.fround);
    const mean = (v: number[]) => v.reduce((s, x) => s + x, 0) / v.length;
    const mx = mean(xs);
    const my = mean(ys);
    const cov = xs.reduce((s, x, i) => s + (x - mx) * (ys[i]! - my), 0);
    const r = cov / Math.sqrt(xs.reduce((s, x) => s + (x - mx) ** 2, 0) * ys.reduce((s, y) => s + (y - my) ** 2, 0));
    assert.ok(Math.abs(all!.pearson - r) < 1e-9);
    const k3 = mean(xs.map((x, i) => Math.exp(ys[i]! - x) - (ys[i]! - x) - 1));
    assert.ok(Math.abs(all!.k3Kl - k3) < 1e-6);
    const diffs = Float64Array.from(xs.map((x, i) => Math.abs(ys[i]! - x))).sort();
    assert.equal(all!.absDiffP50, percentile(diffs, 50));
    assert.ok(Math.abs(all!.absDiffMax - 0.2) < 1e-6);
    assert.equal(percentile(Float64Array.of(1, 2, 3, 4), 50), 2.5);
    assert.ok(Math.abs(percentile(Float64Array.of(0, 10), 99) - 9.9) < 1e-12);
  });
});
