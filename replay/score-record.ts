// A `rlgate replay score` report as the live UI keeps it (store/reports.ts ReplayRecord): the summary figures, the
// verdict the exit code gave, and per scored completion the figures its drift chart plots. NaN becomes null (JSON).
import type { AgreementFigures, ReplayRecord } from "../store/reports.ts";
import { MAX_REPLAY_CALLS } from "../store/reports.ts";
import type { Agreement } from "../util/agreement.ts";
import type { ScoreReport } from "./score.ts";

const finite = (x: number) => (Number.isFinite(x) ? x : null);

function figuresOf(harness: string, a: Agreement): AgreementFigures {
  return {
    harness,
    tokens: a.tokens,
    pearson: finite(a.pearson),
    k3Kl: finite(a.k3Kl),
    absDiffMean: finite(a.absDiffMean),
    absDiffP50: finite(a.absDiffP50),
    absDiffP99: finite(a.absDiffP99),
    absDiffMax: finite(a.absDiffMax),
  };
}

export interface ReplayRunInfo {
  at: number;
  /** Where the rollouts were read (RolloutSource.where). */
  source: string;
  selection: string;
  maxP99: number | undefined;
  exitCode: number;
}

export function replayRecord(report: ScoreReport, run: ReplayRunInfo): Omit<ReplayRecord, "id"> {
  return {
    at: run.at,
    kind: "score",
    upstream: report.upstream,
    source: run.source,
    selection: run.selection,
    rollouts: report.rollouts.length,
    completions: report.completions.length,
    threshold: report.threshold,
    maxP99: run.maxP99 ?? null,
    overall: figuresOf("*", report.overall),
    byHarness: Object.entries(report.byHarness)
      .filter(([h]) => h !== "*")
      .map(([h, a]) => figuresOf(h, a)),
    skipped: report.skipped.length,
    errors: report.errors.length,
    exitCode: run.exitCode,
    verdict: run.exitCode === 0 ? "ok" : run.exitCode === 3 ? "drift" : "error",
    calls: report.completions.slice(0, MAX_REPLAY_CALLS).map((c) => ({
      rolloutId: c.rolloutId,
      callSeq: c.callSeq,
      choiceIndex: c.choiceIndex,
      harness: c.harness,
      tokens: c.agreement.tokens,
      pearson: finite(c.agreement.pearson),
      absDiffP99: finite(c.agreement.absDiffP99),
      absDiffMax: finite(c.agreement.absDiffMax),
      k3Kl: finite(c.agreement.k3Kl),
    })),
  };
}

/** The selection in the words of the command line. */
export function selectionText(ids: readonly string[], group: string | undefined, since: number | undefined): string {
  const parts: string[] = [];
  if (ids.length) parts.push(ids.length <= 3 ? ids.join(" ") : `${ids.length} rollouts`);
  if (group !== undefined) parts.push(`--group ${group}`);
  if (since !== undefined) parts.push(`--since ${new Date(since).toISOString()}`);
  return parts.join(" ");
}
