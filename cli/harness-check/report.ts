// What a scripted session became, one table row: trajectories per segment kind, breaks by kind and cause, the
// amplification (trajectory tokens ÷ unique tokens) and trained ÷ sampled tokens, read from the gateway's
// GET /api/rollouts/{id}/trajectories. The matrix and `rlgate harness-check` print the same table.
import type { CallRecord } from "../../store/records.ts";

/** The trajectories endpoint's answer, as far as the table reads it (camelCase). */
export interface Reconstruction {
  trajectories: { segment: string; trained: boolean; lossMask: number[]; reward: number | null }[];
  segments: unknown[];
  breaks: { kind: string; cause?: string }[];
  stats: {
    calls: number;
    breaks: Record<string, number>;
    sampledTokens: number;
    trainedTokens: number;
    amplification: number;
    retainedTrajectories: number;
  };
  flags: { flagged: boolean; reasons: string[] };
}

export interface Row {
  harness: string;
  session: string;
  outcome: string;
  calls: string;
  segments: string;
  breaks: string;
  amplification: string;
  trained: string;
}

export function summarize(
  harness: string,
  session: string,
  outcome: string,
  calls: readonly CallRecord[],
  rec: Reconstruction | null,
): Row {
  const ok = calls.filter((c) => c.status === "ok").length;
  const count = (keys: string[]) => {
    const n = new Map<string, number>();
    for (const k of keys) n.set(k, (n.get(k) ?? 0) + 1);
    return [...n].map(([k, v]) => `${k} ${v}`).join(", ");
  };
  const s = rec?.stats;
  return {
    harness,
    session,
    outcome,
    calls: `${ok}/${calls.length}`,
    segments: count((rec?.trajectories ?? []).map((t) => t.segment)) || "-",
    // By kind and, where the ids tell, cause: `reserialization (reasoning_dropped) 2`.
    breaks: count((rec?.breaks ?? []).map((b) => (b.cause ? `${b.kind} (${b.cause})` : b.kind))) || "none",
    amplification: s ? s.amplification.toFixed(3) : "-",
    trained: s
      ? `${s.trainedTokens}/${s.sampledTokens} = ${(s.trainedTokens / Math.max(1, s.sampledTokens)).toFixed(3)}`
      : "-",
  };
}

const HEAD: Row = {
  harness: "harness",
  session: "session",
  outcome: "task",
  calls: "calls ok",
  segments: "trajectories per segment",
  breaks: "breaks",
  amplification: "amplif.",
  trained: "trained/sampled",
};

/** The rows as a Markdown table (docs/harnesses.md quotes it as printed). */
export function formatTable(rows: readonly Row[]): string {
  const keys = Object.keys(HEAD) as (keyof Row)[];
  const width = Object.fromEntries(
    keys.map((k) => [k, Math.max(...[HEAD, ...rows].map((r) => r[k].length))]),
  ) as Record<keyof Row, number>;
  const line = (r: Row) => `| ${keys.map((k) => r[k].padEnd(width[k])).join(" | ")} |`;
  return [line(HEAD), `|${keys.map((k) => "-".repeat(width[k] + 2)).join("|")}|`, ...rows.map(line)].join("\n");
}

/** A row that did not run, and why. */
export const notRun = (harness: string, session: string, why: string): Row =>
  summarize(harness, session, why, [], null);
