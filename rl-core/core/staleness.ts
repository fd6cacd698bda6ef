// Staleness (`rlgate core --max-staleness K --stale keep|mask|drop`): a trained token is stale when the version that
// sampled it is older than current − K, the current version being the core's when it processes the token's group
// (policy-version.ts). What the core does with stale tokens:
// - keep (the default): trains them; each row says its staleness and stale tokens, and carries its tokens' versions
//   (CallInfo.policy_version / version_runs) for the trainer's importance weights. Nothing is dropped, so a slow
//   rollout — whose first turns were sampled many updates ago — is trained like a fast one (tinker-cookbook #822:
//   dropping stale rollouts starves the slow ones and biases training toward short tasks).
// - mask: stale tokens leave the loss (loss mask 0, as context), the rollout stays in its group's statistics and
//   its fresh tokens train: a slow rollout keeps its recent turns.
// - drop: a rollout with any stale trained token leaves its group (advantage and loss), counted `stale`. The
//   strictest bound: the trainer never sees a token older than current − K, at the cost #822 describes.
// Tokens whose version has no number (policy-version.ts) are never stale.
import type { CallInfo, VersionRun } from "../../protocol/index.ts";
import { versionNumber } from "./policy-version.ts";

export const STALE_MODES = ["keep", "mask", "drop"] as const;
export type StaleMode = (typeof STALE_MODES)[number];

/** The rule a group is processed under: K and the mode, with the current version's number at that moment. */
export interface StalenessRule {
  maxStaleness: number;
  mode: StaleMode;
  /** null: no numbered version seen yet (nothing is stale). */
  current: number | null;
}

/**
 * The version of each token of a row (null on context), by its calls (the row's own, `callIndex` into them). A call's
 * version runs, as the gateway sends them, are over its sampled tokens: a token's place among them is its distance
 * from the call's first token in the row (a row holds a call's answer from its first token, in one piece), whatever
 * its loss mask — the first tokens of an answer may be trained in another row (a sibling choice sharing them).
 */
export function rowVersions(
  calls: readonly CallInfo[],
  callIndex: Int32Array,
  lossMask: Uint8Array,
): Array<string | null> {
  const first = new Map<number, number>();
  return Array.from({ length: lossMask.length }, (_, t) => {
    const c = callIndex[t]!;
    const call = c >= 0 ? calls[c] : undefined;
    if (!call) return null;
    if (!first.has(c)) first.set(c, t);
    let version = call.policyVersion;
    for (const run of call.versionRuns ?? []) if (run.start <= t - first.get(c)!) version = run.version;
    return version;
  });
}

/** Whether a token of `version` is stale under `rule`. */
export function isStale(version: string | null, rule: StalenessRule | null): boolean {
  if (!rule || rule.current === null) return false;
  const n = versionNumber(version);
  return n !== null && n < rule.current - rule.maxStaleness;
}

/** A row's staleness figures over its trained tokens: current − its oldest version, and its stale tokens. */
export function rowStaleness(
  versions: ReadonlyArray<string | null>,
  lossMask: Uint8Array,
  rule: StalenessRule | null,
): { staleness: number; staleTokens: number } {
  if (!rule || rule.current === null) return { staleness: 0, staleTokens: 0 };
  let oldest = rule.current;
  let staleTokens = 0;
  for (let t = 0; t < lossMask.length; t++) {
    if (lossMask[t] !== 1) continue;
    const n = versionNumber(versions[t]);
    if (n === null) continue;
    oldest = Math.min(oldest, n);
    if (isStale(versions[t]!, rule)) staleTokens++;
  }
  return { staleness: rule.current - oldest, staleTokens };
}

/**
 * A row's calls as a batch carries them: each call's version runs over the row's trained tokens of it in order (the
 * clients' rule, clients/ts/token-versions.ts), from `versions` (rowVersions, over its sampled tokens) and `mask`
 * (the loss mask the row is trained by, after --stale mask).
 */
export function trainedRuns(
  calls: readonly CallInfo[],
  callIndex: Int32Array,
  versions: ReadonlyArray<string | null>,
  mask: Uint8Array,
): CallInfo[] {
  return calls.map((call, c) => {
    if (!call.versionRuns?.length) return call;
    const runs: VersionRun[] = [];
    let k = 0;
    for (let t = 0; t < mask.length; t++) {
      if (callIndex[t] !== c || mask[t] !== 1) continue;
      const version = versions[t] ?? call.policyVersion;
      if (runs.at(-1)?.version !== version) runs.push({ start: k, version });
      k++;
    }
    return { ...call, versionRuns: runs };
  });
}
