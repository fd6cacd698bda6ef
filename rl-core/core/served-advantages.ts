// Advantages over a batch the core served, recomputed by given settings (the core's, or a trainer's request), with
// optional per-token rewards (KL) in the reward: the one computation behind ComputeAdvantages over a served batch and
// the KL advantages of a ref report, so that both agree with the batch's own advantages.
import { computeAdvantagesAsync, type NormalizeBy, type RolloutBatch } from "../estimators/index.ts";
import { maskedWhitenAsync } from "../kernels/index.ts";
import { int32s, LinkError, uint8s } from "../../protocol/index.ts";
import { batchLevelAdvantages, indexStrings } from "./batch-advantages.ts";
import type { StoredBatch } from "./core-store.ts";
import { OUTCOME_ESTIMATORS, type OutcomeEstimator, type Singleton, type WhitenScope } from "./estimator-settings.ts";
import { rolloutValues } from "./group-advantages.ts";

/** The settings advantages over a served batch are computed with (the core's, or a request's). */
export interface ServedSpec {
  estimator: string;
  whitenScope: WhitenScope;
  normalize: NormalizeBy;
  /** reinforce++'s discount (default 1). */
  gamma?: number;
  singleton?: Singleton;
}

/**
 * Rows of `served` per group key, after checking that each group is whole in it: every rollout of its context with a
 * trained token has rows here. Needed where a group's figure takes every rollout's tokens (KL summed into an outcome
 * reward, REINFORCE++ whitened within the group), which exist only for the rollouts of this batch.
 */
function wholeGroups(served: StoredBatch, why: string): Map<string, number[]> {
  const here = new Set(served.rowInfo.map((r) => r.rolloutId));
  const rows = new Map<string, number[]>();
  served.rowInfo.forEach((r, i) => {
    let list = rows.get(r.groupKey);
    if (!list) {
      rows.set(r.groupKey, (list = []));
      r.context.rollouts.forEach((id, u) => {
        if (r.context.tokens[u]! > 0 && !here.has(id))
          throw new LinkError(
            "RLGATE_BAD_REQUEST",
            `${why} needs each group whole in the batch, but rollout ${id} of group '${r.group}' is in another batch (run the core with --batch-unit group)`,
          );
      });
    }
    list.push(i);
  });
  return rows;
}

/**
 * Advantages over a served batch, as the core computed them (group time, then batch level), by `spec` — optionally
 * with per-token rewards in the reward (−β·KL: verl's apply_kl_penalty, token_level_rewards = scores − β·kld):
 * - outcome estimators: one sample per rollout over each row's whole group (rollouts in other batches too); token
 *   rewards add their sum over the rollout's trained tokens to its reward (verl's outcome estimators take
 *   token_level_rewards.sum(-1)), which needs the group whole in the batch;
 * - reinforce++: the per-token return of the token rewards and the outcome reward at the row's last trained token,
 *   whitened within the group (scope group: the group whole in the batch) or over the batch.
 * Then the batch-level steps (batch-advantages.ts). Without token rewards and with the core's settings this is the
 * batch's own advantages.
 */
export async function servedAdvantages(
  served: StoredBatch,
  spec: ServedSpec,
  tokenRewards?: Float32Array,
): Promise<{ advantages: Float32Array; returns: Float32Array | null }> {
  const offsets = int32s(served.offsets);
  const mask = uint8s(served.lossMask);
  const level = { estimator: spec.estimator, whitenScope: spec.whitenScope, normalize: spec.normalize };
  if (spec.estimator === "reinforce++") {
    const layout: RolloutBatch = {
      offsets,
      lossMask: mask,
      rewards: Float64Array.from(served.rowInfo, (r) => r.reward),
    };
    const res = await computeAdvantagesAsync(layout, {
      estimator: "reinforce++",
      gamma: spec.gamma ?? 1,
      tokenRewards,
      whiten: false,
    });
    let advantages = res.advantages;
    if (spec.whitenScope === "group") {
      const groups = wholeGroups(served, "reinforce++ whitened within the group (--whiten-scope group)");
      advantages = await maskedWhitenAsync({
        offsets,
        x: advantages,
        mask,
        rowSegment: indexStrings(served.rowInfo.map((r) => r.groupKey)),
        numSegments: groups.size,
      });
    }
    return {
      advantages: await batchLevelAdvantages(offsets, mask, served.rowInfo, advantages, level),
      returns: res.returns,
    };
  }
  if (!OUTCOME_ESTIMATORS.includes(spec.estimator))
    throw new LinkError("RLGATE_BAD_REQUEST", `${spec.estimator} is not computed over a served batch here`);
  const shift = new Map<string, number>();
  if (tokenRewards) {
    wholeGroups(served, `KL (token rewards) in the reward of ${spec.estimator}`);
    served.rowInfo.forEach((r, i) => {
      let sum = shift.get(r.rolloutId) ?? 0;
      for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (mask[t]) sum += tokenRewards[t]!;
      shift.set(r.rolloutId, sum);
    });
  }
  const value = new Map<string, number>();
  const contexts = new Map(served.rowInfo.map((r) => [r.groupKey, r.context]));
  for (const ctx of contexts.values()) {
    const rewards = ctx.rewards.map((x, u) => x + (shift.get(ctx.rollouts[u]!) ?? 0));
    const values = await rolloutValues(
      spec.estimator as OutcomeEstimator,
      { ...ctx, rewards },
      spec.whitenScope,
      spec.singleton ?? "zero",
    );
    ctx.rollouts.forEach((id, u) => value.set(id, values[u]!));
  }
  const advantages = new Float32Array(mask.length);
  served.rowInfo.forEach((r, i) => {
    const v = value.get(r.rolloutId) ?? 0;
    for (let t = offsets[i]!; t < offsets[i + 1]!; t++) advantages[t] = mask[t] ? v : 0;
  });
  return { advantages: await batchLevelAdvantages(offsets, mask, served.rowInfo, advantages, level), returns: null };
}

/** Outcome advantages over a served batch, each row's group whole (see computeAdvantages). */
export async function servedOutcomeAdvantages(
  served: StoredBatch,
  estimator: OutcomeEstimator,
  scope: WhitenScope,
  normalize: NormalizeBy,
  singleton: Singleton = "zero",
): Promise<Float32Array> {
  return (await servedAdvantages(served, { estimator, whitenScope: scope, normalize, singleton })).advantages;
}
