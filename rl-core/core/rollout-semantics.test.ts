// Issue 15, point by point, on agent rollouts of several trajectories: a main agent whose history was re-serialized
// (trajectories that share a prefix, the shared sampled tokens trained once) and a sub-agent (its own root).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { computeAdvantages } from "../estimators/index.ts";
import { maskedWhiten } from "../kernels/index.ts";
import { float32s, int32s, uint8s } from "../../protocol/index.ts";
import { buildBatch } from "./batch-packer.ts";
import type { PendingRollout, ReadyRow } from "./core-store.ts";
import { OUTCOME_ESTIMATORS, type OutcomeEstimator } from "./estimator-settings.ts";
import { groupAdvantages } from "./group-advantages.ts";
import { GroupTracker } from "./groups.ts";
import { pending, type Row } from "./test-support.ts";
import { servedOutcomeAdvantages } from "./served-advantages.ts";

const SYSTEM = [1, 2, 3];

/**
 * An agent rollout with `trajectories` trajectories: the first the main agent's, then re-serializations of it
 * (each shares the system prompt and the first sampled turn, mask 0 where an earlier one trains it), the last a
 * sub-agent when there are three or more. Token ids are unique to the rollout past the system prompt.
 */
function agent(id: string, reward: number, trajectories: number, extra: Partial<PendingRollout> = {}): PendingRollout {
  const base = 100 * (id.charCodeAt(0) + 7 * id.length + Number(id.replace(/\D/g, "") || 0));
  const rows: Row[] = [];
  const segments: string[] = [];
  for (let k = 0; k < trajectories; k++) {
    const sub = trajectories >= 3 && k === trajectories - 1;
    if (sub) {
      rows.push({ ids: [9, 9, base + 90, base + 91, base + 92], mask: [0, 0, 0, 1, 1] });
    } else {
      // [system, user, turn 1 (sampled), tool output, turn 2 (sampled, differs per re-serialization)]
      const turn2 = [base + 10 + 3 * k, base + 11 + 3 * k];
      rows.push({
        ids: [...SYSTEM, base, base + 1, base + 2, base + 5, ...turn2],
        mask: [0, 0, 0, 0, k === 0 ? 1 : 0, k === 0 ? 1 : 0, 0, 1, 1],
      });
    }
    segments.push(sub ? "sub_agent" : "main");
  }
  return { ...pending(id, reward, rows), segments, ...extra };
}

function trained(row: ReadyRow): number[] {
  const mask = uint8s(row.lossMask);
  return [...float32s(row.advantages)].filter((_, i) => mask[i] === 1);
}

const close = (a: number, b: number, what: string, tol = 1e-5) =>
  assert.ok(Math.abs(a - b) <= tol, `${what}: ${a} vs ${b}`);

describe("issue 15: the rollout is the sample, groups have a lifecycle, batches carry what a trainer needs", () => {
  test("1. reusing a group name opens its next generation: four new rollouts after g1 was trained are trained, not dropped", () => {
    const tracker = new GroupTracker({ defaultSize: 0, timeoutMs: 60_000 });
    const arrive = (id: string) => {
      const a = tracker.assign("g1", id, 4);
      tracker.add(
        pending(id, 1, [], {
          groupKey: a.key,
          group: "g1",
          generation: a.generation,
          late: a.late,
          declaredSize: a.size,
        }),
      );
      return a;
    };
    for (const id of ["a", "b", "c", "d"]) arrive(id);
    assert.deepEqual(tracker.due(Date.now()), [{ key: "group:g1#1", by: "size" }]);
    tracker.take("group:g1#1");
    const second = ["e", "f", "g", "h"].map(arrive);
    assert.deepEqual(
      second.map((a) => [a.key, a.late]),
      Array(4).fill(["group:g1#2", false]),
    );
    assert.deepEqual(tracker.due(Date.now()), [{ key: "group:g1#2", by: "size" }]);
  });

  test("2. tree on agent rollouts: V(root) is the rollout mean, and each rollout's trajectories share 2(r - V̄)", async () => {
    // Rollouts of 1, 1, 2 and 4 trajectories; the trajectory-weighted mean (1.9375) would put rollout b (1.5)
    // below the baseline, the rollout mean (1.375) above it.
    const rollouts = [agent("a", 0, 1), agent("b", 1.5, 1), agent("c", 1, 2), agent("d", 3, 4)];
    const { rows } = await groupAdvantages(rollouts, { estimator: "tree" });
    const mean = (0 + 1.5 + 1 + 3) / 4;
    for (const row of rows) {
      const expected = 2 * (row.reward - mean);
      for (const a of trained(row)) close(a, expected, `${row.trajectoryId}`);
    }
    assert.ok(trained(rows.find((r) => r.rolloutId === "b")!)[0]! > 0, "b is above the rollout mean");
    assert.equal(rows.filter((r) => r.rolloutId === "d").length, 4, "every trajectory of d is a row");
  });

  test("3. ComputeAdvantages over a served batch equals the batch's own advantages, for every outcome estimator, group split across batches", async () => {
    for (const estimator of OUTCOME_ESTIMATORS as OutcomeEstimator[]) {
      for (const normalize of ["none", "batch"] as const) {
        const { rows } = await groupAdvantages([agent("a", 1, 1), agent("b", 0, 2), agent("c", 0.25, 4)], {
          estimator,
        });
        // The batch holds rollouts b and c only; a is in another batch.
        const served = await buildBatch(
          1,
          rows.filter((r) => r.rolloutId !== "a"),
          { normalize, lossAgg: "token-mean", estimator },
        );
        const asked = await servedOutcomeAdvantages(served, estimator, "batch", normalize);
        assert.deepEqual([...asked], [...float32s(served.advantages)], `${estimator}, normalize ${normalize}`);
      }
    }
    // And the numbers are the group's, one sample per rollout: GRPO over rewards 1, 0, 0.25.
    const { rows } = await groupAdvantages([agent("a", 1, 1), agent("b", 0, 2), agent("c", 0.25, 4)], {
      estimator: "grpo",
    });
    const ref = computeAdvantages(
      {
        offsets: Int32Array.of(0, 1, 2, 3),
        lossMask: Uint8Array.of(1, 1, 1),
        rewards: Float64Array.of(1, 0, 0.25),
        groupIds: new Int32Array(3),
      },
      { estimator: "grpo" },
    );
    for (const row of rows)
      for (const a of trained(row)) close(a, ref.advantages["abc".indexOf(row.rolloutId)]!, row.trajectoryId);
  });

  test("4. --normalize keeps 'no baseline → 0': a singleton and an equal-reward group stay 0 wherever batch boundaries fall", async () => {
    const alone = (
      await groupAdvantages([agent("s", 2, 2, { groupKey: "rollout:s", group: "" })], { estimator: "grpo" })
    ).rows;
    const equal = (
      await groupAdvantages(
        [agent("e", 1, 1, { groupKey: "group:e#1" }), agent("f", 1, 2, { groupKey: "group:e#1" })],
        { estimator: "grpo" },
      )
    ).rows;
    const real = (await groupAdvantages([agent("a", 1, 1), agent("b", 0, 2)], { estimator: "grpo" })).rows;
    for (const layout of [
      [...alone, ...equal, ...real],
      [...alone, ...real],
      [...real, ...equal],
    ]) {
      const batch = await buildBatch(1, layout, { normalize: "batch", lossAgg: "token-mean", estimator: "grpo" });
      const adv = float32s(batch.advantages);
      const offsets = int32s(batch.offsets);
      batch.rowInfo.forEach((r, i) => {
        if (r.signal !== "ok")
          assert.ok(
            adv.subarray(offsets[i]!, offsets[i + 1]!).every((x) => x === 0),
            `${r.rolloutId} stays 0`,
          );
        assert.equal(r.noSignal, r.signal !== "ok");
      });
      assert.ok(
        batch.rowInfo.some(
          (r, i) => r.signal === "ok" && adv.subarray(offsets[i]!, offsets[i + 1]!).some((x) => x !== 0),
        ),
      );
    }
  });

  test("5. seq-mean loss modes weigh rollouts, not trajectories; Dr.GRPO's constant is --max-len", async () => {
    const { rows } = await groupAdvantages([agent("a", 1, 2), agent("b", 0, 1)], { estimator: "grpo" });
    const batch = await buildBatch(1, rows, { normalize: "none", lossAgg: "seq-mean-token-mean", estimator: "grpo" });
    const w = float32s(batch.lossWeights);
    const offsets = int32s(batch.offsets);
    const perRollout = new Map<string, number>();
    batch.rowInfo.forEach((r, i) =>
      perRollout.set(
        r.rolloutId,
        (perRollout.get(r.rolloutId) ?? 0) + w.subarray(offsets[i]!, offsets[i + 1]!).reduce((s, x) => s + x, 0),
      ),
    );
    close(perRollout.get("a")!, 0.5, "the 2-trajectory rollout weighs a half");
    close(perRollout.get("b")!, 0.5, "the 1-trajectory rollout weighs a half");
    assert.equal(batch.rollouts, 2);
    const norm = await buildBatch(2, rows, {
      normalize: "none",
      lossAgg: "seq-mean-token-sum-norm",
      estimator: "grpo",
      maxLen: 64,
    });
    // Dr.GRPO over this batch's 2 rollouts: each rollout's token sum / L, averaged (issue 22 item 5).
    const mask = uint8s(norm.lossMask);
    float32s(norm.lossWeights).forEach((x, t) => assert.equal(x, mask[t] ? Math.fround(1 / (2 * 64)) : 0));
  });

  test("6. REINFORCE++-baseline whitens over the batch (group scope on request); plain REINFORCE++ discounts with γ", async () => {
    const g1 = (await groupAdvantages([agent("a", 1, 1), agent("b", 0, 2)], { estimator: "reinforce++-baseline" }))
      .rows;
    const g2 = (
      await groupAdvantages(
        [agent("c", 5, 1, { groupKey: "group:h#1" }), agent("d", 1, 4, { groupKey: "group:h#1" })],
        { estimator: "reinforce++-baseline" },
      )
    ).rows;
    const batch = await buildBatch(1, [...g1, ...g2], {
      normalize: "none",
      lossAgg: "token-mean",
      estimator: "reinforce++-baseline",
      whitenScope: "batch",
    });
    const offsets = int32s(batch.offsets);
    const mask = uint8s(batch.lossMask);
    // The reference: r - group mean on every trained token, whitened over the whole batch.
    const raw = new Float32Array(mask.length);
    batch.rowInfo.forEach((r, i) => {
      const mean = r.groupKey === "group:h#1" ? 3 : 0.5;
      for (let t = offsets[i]!; t < offsets[i + 1]!; t++) raw[t] = mask[t] ? r.reward - mean : 0;
    });
    const expected = maskedWhiten({ offsets, x: raw, mask });
    float32s(batch.advantages).forEach((x, t) => close(x, expected[t]!, `token ${t}`));
    // Within the group instead: each group's tokens have mean 0 on their own.
    const scoped = (
      await groupAdvantages(
        [agent("c", 5, 1, { groupKey: "group:h#1" }), agent("d", 1, 4, { groupKey: "group:h#1" })],
        { estimator: "reinforce++-baseline", whitenScope: "group" },
      )
    ).rows;
    const tokens = scoped.flatMap(trained);
    close(tokens.reduce((s, x) => s + x, 0) / tokens.length, 0, "group-whitened mean");

    // Plain REINFORCE++: per trajectory, the reward discounted from its last trained token (no whitening here).
    const plain = (
      await groupAdvantages([agent("a", 1, 1)], { estimator: "reinforce++", gamma: 0.5, whitenScope: "group" })
    ).rows;
    assert.equal(plain.length, 1);
    const unwhitened = computeAdvantages(
      {
        offsets: Int32Array.of(0, 4),
        lossMask: Uint8Array.of(1, 0, 1, 1),
        rewards: Float64Array.of(2),
        groupIds: new Int32Array(1),
      },
      { estimator: "reinforce++", gamma: 0.5, whiten: false, tokenRewards: Float32Array.of(-0.25, 0, 0, 0) },
    );
    // G3 = 2, G2 = 0.5·2 = 1, G0 = -0.25 + 0.5·1 = 0.25 (context token 1 skipped)
    assert.deepEqual([...unwhitened.advantages], [0.25, 0, 1, 2]);
  });

  test("7. group makeup does not depend on timing: the same log gives every rollout the same generation with or without a timeout", () => {
    const log = ["a", "b", "c", "d", "e", "f", "g"];
    const replay = (timeoutAfter: number | null) => {
      const tracker = new GroupTracker({ defaultSize: 0, timeoutMs: 60_000 });
      return log.map((id, i) => {
        const a = tracker.assign("task-1", id, 3);
        tracker.add(
          pending(id, 1, [], {
            groupKey: a.key,
            group: "task-1",
            generation: a.generation,
            late: a.late,
            declaredSize: a.size,
          }),
        );
        if (i === timeoutAfter)
          tracker.take(a.key); // the group timed out here, short of its size
        else for (const { key } of tracker.due(Date.now())) tracker.take(key);
        return `${id}:${a.generation}${a.late ? "+late" : ""}`;
      });
    };
    // b's generation timed out with 2 of 3: c is its late one (reported as such), not a member of generation 2.
    assert.deepEqual(replay(1), ["a:1", "b:1", "c:1+late", "d:2", "e:2", "f:2", "g:3"]);
    assert.deepEqual(replay(null), ["a:1", "b:1", "c:1", "d:2", "e:2", "f:2", "g:3"]);
  });

  test("8. loss weights are normalised by a global token count: a 141-token batch counts 141/N, an 814-token one 814/N", async () => {
    const make = async (tokens: number) => {
      const row = (
        await groupAdvantages(
          [pending("x", 1, [{ ids: Array.from({ length: tokens }, (_, i) => i), mask: Array(tokens).fill(1) }])],
          { estimator: "grpo" },
        )
      ).rows;
      return buildBatch(1, row, { normalize: "none", lossAgg: "token-mean", estimator: "grpo", lossTokens: 1000 });
    };
    for (const n of [141, 814]) {
      const batch = await make(n);
      close(
        float32s(batch.lossWeights).reduce((s, x) => s + x, 0),
        n / 1000,
        `${n} tokens`,
        1e-5,
      );
      assert.equal(batch.lossTokens, 1000);
    }
  });

  test("--drop-zero-variance-groups drops equal-reward groups, counted as zero_variance", async () => {
    const result = await groupAdvantages([agent("a", 1, 2), agent("b", 1, 1)], {
      estimator: "grpo",
      dropZeroVariance: true,
    });
    assert.deepEqual(result.rows, []);
    assert.deepEqual(
      result.dropped.map((d) => d.reason),
      ["zero_variance", "zero_variance"],
    );
  });
});
