// What the live UI shows besides rollouts: training–inference agreement as RL cores report it (from trainers'
// logprobs), and the results of `rlgate replay score` runs. Kept in the store under a key of their own, newest
// last, the oldest dropped past a limit, so a page opened later (or another gateway process) sees the history.
import type { Database } from "lmdb";

/** One harness's figures (the core's Consistency, replay score's Agreement): NaN where undefined (stored as null). */
export interface AgreementFigures {
  harness: string;
  tokens: number;
  pearson: number | null;
  k3Kl: number | null;
  absDiffMean: number | null;
  absDiffP50: number | null;
  absDiffP99: number | null;
  absDiffMax: number | null;
}

/** A trainer's logprob report, as the core sent it over the trajectory stream. */
export interface AgreementRecord {
  id: number;
  /** The core's clock, epoch ms. */
  at: number;
  batchId: number;
  /** The core's member name. */
  core: string;
  /** "*" (the whole batch) first, then per harness. */
  harnesses: AgreementFigures[];
}

/** One scored completion of a replay run (the per-call drift chart). */
export interface ReplayCall {
  rolloutId: string;
  callSeq: number;
  choiceIndex: number;
  harness: string;
  tokens: number;
  pearson: number | null;
  absDiffP99: number | null;
  absDiffMax: number | null;
  k3Kl: number | null;
}

/** A `rlgate replay score` run. */
export interface ReplayRecord {
  id: number;
  at: number;
  kind: "score";
  upstream: string;
  /** Where the rollouts were read: a store directory or a gateway URL. */
  source: string;
  /** The selection as given: ids, --group, --since. */
  selection: string;
  rollouts: number;
  completions: number;
  threshold: number;
  maxP99: number | null;
  overall: AgreementFigures;
  byHarness: AgreementFigures[];
  skipped: number;
  errors: number;
  /** 0 ok, 3 past --max-p99, 1 error: the command's exit code. */
  exitCode: number;
  verdict: "ok" | "drift" | "error";
  calls: ReplayCall[];
}

export type ReplaySummary = Omit<ReplayRecord, "calls">;

export const MAX_AGREEMENT_RECORDS = 10_000;
export const MAX_REPLAY_RECORDS = 1000;
/** Scored completions kept per replay run (the chart's points). */
export const MAX_REPLAY_CALLS = 20_000;

type ReportKey = ["agreement" | "replay", number];

export class ReportLog {
  readonly #db: Database<AgreementRecord | ReplayRecord, ReportKey>;

  constructor(db: Database<AgreementRecord | ReplayRecord, ReportKey>) {
    this.#db = db;
  }

  /** Writes a record and drops the oldest of its kind past `max` (in the same transaction). */
  put(kind: ReportKey[0], record: AgreementRecord | ReplayRecord, max: number): Promise<void> {
    return this.#db.transaction(() => {
      void this.#db.put([kind, record.id], record);
      const count = this.#db.getKeysCount({ start: [kind, 0], end: [kind, Number.MAX_SAFE_INTEGER] });
      if (count <= max) return;
      for (const key of this.#db.getKeys({
        start: [kind, 0],
        end: [kind, Number.MAX_SAFE_INTEGER],
        limit: count - max,
      }))
        void this.#db.remove(key);
    }) as Promise<unknown> as Promise<void>;
  }

  /** The newest `limit` records of a kind, oldest first. */
  list<T>(kind: ReportKey[0], limit: number): T[] {
    const out: T[] = [];
    for (const { value } of this.#db.getRange({
      start: [kind, Number.MAX_SAFE_INTEGER],
      end: [kind, 0],
      reverse: true,
      limit,
    }))
      out.push(value as T);
    return out.reverse();
  }

  get<T>(kind: ReportKey[0], id: number): T | undefined {
    return this.#db.get([kind, id]) as T | undefined;
  }
}
