// Where branches of a backbone rollout start: K decision points among its calls, picked from what the gateway
// recorded (the control API's call records). A decision point is a call's position among the backbone's calls that
// ended ok with token ids, in the order they were made (the gateway counts `at_call` the same way), and for a point
// at a token position (tokens prompt mode) the position among that call's sampled ids (`at_token`).

export type BranchAt =
  | { kind: "entropy" }
  | { kind: "uniform" }
  | { kind: "calls"; calls: number[] }
  | { kind: "token-entropy" }
  | { kind: "token-uniform" }
  | { kind: "tokens"; points: TokenPoint[] };

/** A decision point inside a call: the call's position, and the sampled token's position in its first choice. */
export interface TokenPoint {
  call: number;
  token: number;
}

/** Where one branch starts: a whole call (`token` absent), or a token position in it. */
export interface BranchPoint {
  call: number;
  token?: number;
}

const FORMS = "entropy, uniform, calls=i,j, tokens:entropy, tokens:uniform or tokens=i:p,j:q";

export class BranchPointError extends Error {
  readonly code = "RLGATE_RUN_BRANCH";
}

/** `--branch-at`: entropy, uniform, calls=i,j (0-based positions), or their token forms (call i, token p). */
export function parseBranchAt(text: string): BranchAt {
  if (text === "entropy" || text === "uniform") return { kind: text };
  if (text === "tokens:entropy") return { kind: "token-entropy" };
  if (text === "tokens:uniform") return { kind: "token-uniform" };
  const calls = /^calls=(\d+(?:,\d+)*)$/.exec(text.trim());
  if (calls) return { kind: "calls", calls: calls[1]!.split(",").map(Number) };
  const tokens = /^tokens=(\d+:\d+(?:,\d+:\d+)*)$/.exec(text.trim());
  if (tokens) {
    const points = tokens[1]!.split(",").map((pair) => {
      const [call, token] = pair.split(":").map(Number);
      return { call: call!, token: token! };
    });
    return { kind: "tokens", points };
  }
  throw new BranchPointError(`expected ${FORMS} (0-based positions), got '${text}'`);
}

/** What the points are chosen from: one backbone call as the control API gives it (snake_case). */
export interface RecordedCall {
  seq: number;
  status: string;
  prompt_token_ids: number[] | null;
  /** `entropies`: per sampled token, from the top logprobs the backbone asked for (metadata.entropy_top_k). */
  choices: Array<{ token_ids: number[]; logprobs: number[] | null; entropies?: number[] | null }>;
  replay_of?: unknown;
  /** How the prompt was made: token positions are points only in calls served from tokens. */
  prompt?: { mode?: string } | null;
}

/** The calls a branch can start at, in order (as the gateway's replayableCalls). */
export function decisionCalls(calls: readonly RecordedCall[]): RecordedCall[] {
  return calls.filter((c) => c.status === "ok" && c.prompt_token_ids !== null).sort((a, b) => a.seq - b.seq);
}

/**
 * A call's uncertainty: the mean over its sampled tokens of the policy's entropy there — from the top logprobs when
 * the backbone asked for them (`entropies`), else each token's surprisal (−logprob), a one-sample estimate of it.
 * 0 for a call with neither.
 */
export function callSurprisal(call: RecordedCall): number {
  let sum = 0;
  let n = 0;
  for (const choice of call.choices)
    for (const h of choice.entropies ?? (choice.logprobs ?? []).map((lp) => -lp)) {
      sum += h;
      n++;
    }
  return n ? sum / n : 0;
}

/**
 * K decision points (positions, ascending, a point repeated when K exceeds the distinct ones: more samples at it).
 * entropy: the K calls with the highest mean entropy (callSurprisal); uniform: evenly spread; calls: as given, cycled to K.
 */
export function pickBranchPoints(
  calls: readonly RecordedCall[],
  k: number,
  at: Extract<BranchAt, { kind: "entropy" | "uniform" | "calls" }>,
): number[] {
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

/**
 * Per sampled token of a call's first choice, how uncertain the policy was there: the entropy from its top logprobs
 * when recorded, else its surprisal (−logprob).
 */
export function tokenScores(call: RecordedCall): number[] {
  const choice = call.choices[0];
  if (!choice) return [];
  return choice.token_ids.map((_, i) => {
    const h = choice.entropies?.[i];
    if (typeof h === "number" && Number.isFinite(h)) return h;
    const lp = choice.logprobs?.[i];
    return typeof lp === "number" && Number.isFinite(lp) ? -lp : 0;
  });
}

/** K points, calls or token positions, as `at` says (in order: call, then token; repeated points are more samples). */
export function branchPoints(calls: readonly RecordedCall[], k: number, at: BranchAt): BranchPoint[] {
  if (at.kind === "entropy" || at.kind === "uniform" || at.kind === "calls")
    return pickBranchPoints(calls, k, at).map((call) => ({ call }));
  return pickTokenPoints(calls, k, at);
}

/**
 * K token positions. Candidates: every sampled token of the calls served from tokens (a branch there keeps the ids
 * before it and samples the token again). tokens:entropy: the K positions whose sampled token was least likely;
 * tokens:uniform: evenly spread over all candidates; tokens=: as given, cycled to K.
 */
export function pickTokenPoints(
  calls: readonly RecordedCall[],
  k: number,
  at: Extract<BranchAt, { kind: "token-entropy" | "token-uniform" | "tokens" }>,
): TokenPoint[] {
  const ordered = decisionCalls(calls);
  if (ordered.length === 0)
    throw new BranchPointError("the backbone has no call that ended ok with token ids to branch at");
  const served = (i: number) => ordered[i]!.prompt?.mode === "tokens";
  let distinct: TokenPoint[];
  if (at.kind === "tokens") {
    for (const p of at.points) {
      const call = ordered[p.call];
      if (!call)
        throw new BranchPointError(
          `call ${p.call} is past the backbone's ${ordered.length} call(s) (0-based positions)`,
        );
      if (!served(p.call))
        throw new BranchPointError(`call ${p.call} was not served from tokens: token positions need --prompts tokens`);
      const n = call.choices[0]?.token_ids.length ?? 0;
      if (p.token >= n) throw new BranchPointError(`token ${p.token} is past the ${n} token(s) call ${p.call} sampled`);
    }
    distinct = at.points;
  } else {
    const candidates: Array<TokenPoint & { score: number }> = [];
    ordered.forEach((call, i) => {
      if (served(i)) tokenScores(call).forEach((score, token) => candidates.push({ call: i, token, score }));
    });
    if (candidates.length === 0)
      throw new BranchPointError("no backbone call was served from tokens: token positions need --prompts tokens");
    const m = Math.min(k, candidates.length);
    if (at.kind === "token-uniform") {
      distinct = Array.from({ length: m }, (_, i) => candidates[Math.floor(((i + 0.5) * candidates.length) / m)]!);
    } else {
      const ranked = [...candidates].sort((a, b) => b.score - a.score || a.call - b.call || a.token - b.token);
      distinct = ranked.slice(0, m);
    }
    distinct = distinct.map(({ call, token }) => ({ call, token }));
  }
  return Array.from({ length: k }, (_, j) => distinct[j % distinct.length]!).sort(
    (a, b) => a.call - b.call || a.token - b.token,
  );
}
