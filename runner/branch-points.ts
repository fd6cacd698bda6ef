// Where branches of a backbone rollout start: K decision points among its calls, picked from what the gateway
// recorded (the control API's call records). A decision point is a call's position among the backbone's calls that
// ended ok with token ids, in the order they were made (the gateway counts `at_call` the same way).

export type BranchAt = { kind: "entropy" } | { kind: "uniform" } | { kind: "calls"; calls: number[] };

export class BranchPointError extends Error {
  readonly code = "RLGATE_RUN_BRANCH";
}

/** `--branch-at`: entropy, uniform, or calls=i,j,... (0-based positions). */
export function parseBranchAt(text: string): BranchAt {
  if (text === "entropy" || text === "uniform") return { kind: text };
  const m = /^calls=(\d+(?:,\d+)*)$/.exec(text.trim());
  if (!m)
    throw new BranchPointError(`expected entropy, uniform or calls=i,j,... (0-based call positions), got '${text}'`);
  return { kind: "calls", calls: m[1]!.split(",").map(Number) };
}

/** What the points are chosen from: one backbone call as the control API gives it (snake_case). */
export interface RecordedCall {
  seq: number;
  status: string;
  prompt_token_ids: number[] | null;
  choices: Array<{ token_ids: number[]; logprobs: number[] | null }>;
  replay_of?: unknown;
}

/** The calls a branch can start at, in order (as the gateway's replayableCalls). */
export function decisionCalls(calls: readonly RecordedCall[]): RecordedCall[] {
  return calls.filter((c) => c.status === "ok" && c.prompt_token_ids !== null).sort((a, b) => a.seq - b.seq);
}

/**
 * A call's uncertainty: the mean surprisal (−logprob) of the tokens it sampled, a one-sample estimate of the
 * policy's entropy along the answer (the gateway records the sampled tokens' logprobs, not full distributions).
 * 0 for a call without logprobs.
 */
export function callSurprisal(call: RecordedCall): number {
  let sum = 0;
  let n = 0;
  for (const choice of call.choices)
    for (const lp of choice.logprobs ?? []) {
      sum -= lp;
      n++;
    }
  return n ? sum / n : 0;
}

/**
 * K decision points (positions, ascending, a point repeated when K exceeds the distinct ones: more samples at it).
 * entropy: the K calls with the highest surprisal; uniform: evenly spread; calls: as given, cycled to K.
 */
export function pickBranchPoints(calls: readonly RecordedCall[], k: number, at: BranchAt): number[] {
  const count = decisionCalls(calls).length;
  if (count === 0) throw new BranchPointError("the backbone has no call that ended ok with token ids to branch at");
  let distinct: number[];
  if (at.kind === "calls") {
    const bad = at.calls.find((i) => i >= count);
    if (bad !== undefined)
      throw new BranchPointError(`call ${bad} is past the backbone's ${count} call(s) (0-based positions)`);
    distinct = at.calls;
  } else if (at.kind === "uniform") {
    const m = Math.min(k, count);
    distinct = Array.from({ length: m }, (_, i) => Math.floor(((i + 0.5) * count) / m));
  } else {
    const scored = decisionCalls(calls).map((c, i) => ({ i, s: callSurprisal(c) }));
    scored.sort((a, b) => b.s - a.s || a.i - b.i);
    distinct = scored.slice(0, Math.min(k, count)).map((x) => x.i);
  }
  return Array.from({ length: k }, (_, j) => distinct[j % distinct.length]!).sort((a, b) => a - b);
}
