// The policy version of every token of an exported trajectory, stored ∝ changes (docs/weight-updates.md): runs over
// the trajectory's positions, `{start, version}` — tokens from `start` to the next run's start were sampled by
// `version`; `version` null on context (tokens no call of this trajectory sampled) and on a call that named no
// version. A call's tokens have its policy version, or, when a weight update fell inside its answer, the versions of
// its recorded runs (CallSummary.policyVersions, over the choice's sampled tokens). The first run starts at 0 when
// the trajectory has a token; adjacent runs never have the same version.
import type { CallSummary, Trajectory } from "../trajectory/index.ts";

export interface VersionRun {
  start: number;
  version: string | null;
}

class Runs {
  readonly list: VersionRun[] = [];

  /** Tokens from `start` on have `version` (start never before the last run's). */
  add(start: number, version: string | null): void {
    const last = this.list.at(-1);
    if (last && last.start === start) {
      this.list.pop();
      return this.add(start, version);
    }
    if (last?.version === version) return;
    this.list.push({ start, version });
  }
}

export function trajectoryVersionRuns(t: Trajectory, calls: readonly CallSummary[]): VersionRun[] {
  const bySeq = new Map(calls.map((c) => [c.callSeq, c]));
  const runs = new Runs();
  // Where each (call, choice)'s sampled tokens begin in this trajectory: a later span of the same choice continues it.
  const firstStart = new Map<string, number>();
  let at = 0;
  for (const span of [...t.spans].sort((a, b) => a.start - b.start)) {
    if (span.start > at) runs.add(at, null);
    const key = `${span.callSeq}:${span.choiceIndex}`;
    if (!firstStart.has(key)) firstStart.set(key, span.start);
    const offset = span.start - firstStart.get(key)!;
    const call = bySeq.get(span.callSeq);
    runs.add(span.start, call?.policyVersion ?? null);
    for (const run of call?.policyVersions ?? []) {
      const from = run.start - offset;
      if (from >= span.end - span.start) break;
      if (from >= 0) runs.add(span.start + from, run.version);
      else runs.add(span.start, run.version); // the run began before this span: it covers the span's start
    }
    at = span.end;
  }
  if (at < t.tokenIds.length) runs.add(at, null);
  return runs.list;
}

/** The runs of positions [from, to) of a trajectory, re-based at `from` (a response's, a shifted sequence's). */
export function sliceVersionRuns(runs: readonly VersionRun[], from: number, to: number): VersionRun[] {
  const out = new Runs();
  for (let i = 0; i < runs.length; i++) {
    const end = runs[i + 1]?.start ?? Infinity;
    if (end <= from || runs[i]!.start >= to) continue;
    out.add(Math.max(runs[i]!.start, from) - from, runs[i]!.version);
  }
  return out.list;
}
