// What the live page's charts show of a whole run, kept as it happens: per second of wall time, the calls that
// started in it (count, failures, prompt and sampled tokens, rlgate's overhead and the call's latency as log-scale
// histograms) and the rollouts that finished in it (count, reward sum). Committed calls and finishes are added up in
// memory and written once a second in a transaction of their own (each bucket read, added to and written back, so
// gateway workers sharing the store add to one series): a call's commit touches no other table (that cost ~40 µs a
// commit, measured), and a crash loses at most the last second of the charts, never a call. Each delta goes to its
// minute too (a second table), so a chart of a day or a week reads one record per minute (a day of seconds took
// 1.4 s, measured): a chart reads at most one record per second of an hour's window, never a call.
import type { Database, RootDatabase } from "lmdb";
import type { CallRecord, RolloutRecord } from "./records.ts";

/** One second's figures as stored. Histograms are sparse: log bin → count. */
export interface SeriesBucket {
  calls: number;
  errors: number;
  promptTokens: number;
  sampledTokens: number;
  overhead: Record<number, number>;
  latency: Record<number, number>;
  finished: number;
  rewarded: number;
  rewardSum: number;
}

/** Second (epoch s) → its bucket; in the minutes table, minute (epoch s ÷ 60) → its bucket. */
export type SeriesTable = Database<SeriesBucket, number>;

/** The two resolutions kept. */
export interface SeriesTables {
  seconds: SeriesTable;
  minutes: SeriesTable;
}

/** What a call adds to its second: read from the record before it is encoded. */
export interface CallPoint {
  second: number;
  failed: boolean;
  promptTokens: number;
  sampledTokens: number;
  overheadMs: number;
  latencyMs: number;
}

/** The figures of a window of buckets, merged. */
export interface SeriesPoint {
  /** Start of the window (epoch ms). */
  at: number;
  calls: number;
  errors: number;
  promptTokens: number;
  sampledTokens: number;
  overheadP50: number | null;
  overheadP99: number | null;
  latencyP50: number | null;
  latencyP99: number | null;
  finished: number;
  rewardMean: number | null;
}

// Bins of a quarter octave from 1 µs: a percentile read back is within 9 % of the true one (the bin's geometric
// middle), and 128 bins reach past an hour.
const BIN_FLOOR_MS = 0.001;
const BINS_PER_OCTAVE = 4;
const MAX_BIN = 127;

export function binOf(ms: number): number {
  if (!(ms > BIN_FLOOR_MS)) return 0;
  return Math.min(MAX_BIN, Math.floor(BINS_PER_OCTAVE * Math.log2(ms / BIN_FLOOR_MS)));
}

export function binValue(bin: number): number {
  return BIN_FLOOR_MS * 2 ** ((bin + 0.5) / BINS_PER_OCTAVE);
}

export function callPoint(call: CallRecord): CallPoint {
  const t = call.timings;
  return {
    second: Math.floor(t.start / 1000),
    failed: call.status !== "ok",
    promptTokens: call.promptTokenIds?.length ?? 0,
    sampledTokens: call.choices.reduce((n, c) => n + c.tokenIds.length, 0),
    overheadMs: t.overheadMs ?? 0,
    latencyMs: Math.max(0, t.end - t.start),
  };
}

function emptyBucket(): SeriesBucket {
  return {
    calls: 0,
    errors: 0,
    promptTokens: 0,
    sampledTokens: 0,
    overhead: {},
    latency: {},
    finished: 0,
    rewarded: 0,
    rewardSum: 0,
  };
}

function count(histogram: Record<number, number>, ms: number, n = 1): void {
  const bin = binOf(ms);
  histogram[bin] = (histogram[bin] ?? 0) + n;
}

function addHistogram(into: Record<number, number>, from: Record<number, number>): void {
  for (const [bin, n] of Object.entries(from)) into[Number(bin)] = (into[Number(bin)] ?? 0) + n;
}

function addBucket(into: SeriesBucket, from: SeriesBucket): void {
  into.calls += from.calls;
  into.errors += from.errors;
  into.promptTokens += from.promptTokens;
  into.sampledTokens += from.sampledTokens;
  into.finished += from.finished;
  into.rewarded += from.rewarded;
  into.rewardSum += from.rewardSum;
  addHistogram(into.overhead, from.overhead);
  addHistogram(into.latency, from.latency);
}

const FLUSH_MS = 1000;

/** Inside a write transaction: adds `delta` to the bucket stored at `key`. */
function addStored(table: SeriesTable, key: number, delta: SeriesBucket): void {
  const bucket = emptyBucket();
  const stored = table.get(key);
  if (stored) addBucket(bucket, stored);
  addBucket(bucket, delta);
  void table.put(key, bucket);
}

/** Adds committed calls and finishes up in memory and writes them to the series table once a second. */
export class SeriesRecorder {
  readonly #root: RootDatabase;
  readonly #tables: SeriesTables;
  #pending = new Map<number, SeriesBucket>();
  #timer: NodeJS.Timeout | null = null;

  constructor(root: RootDatabase, tables: SeriesTables) {
    this.#root = root;
    this.#tables = tables;
  }

  #bucket(second: number): SeriesBucket {
    let bucket = this.#pending.get(second);
    if (!bucket) this.#pending.set(second, (bucket = emptyBucket()));
    if (!this.#timer) {
      this.#timer = setTimeout(() => this.flush(), FLUSH_MS);
      this.#timer.unref();
    }
    return bucket;
  }

  /** A committed call. */
  addCall(point: CallPoint): void {
    const bucket = this.#bucket(point.second);
    bucket.calls++;
    if (point.failed) bucket.errors++;
    bucket.promptTokens += point.promptTokens;
    bucket.sampledTokens += point.sampledTokens;
    count(bucket.overhead, point.overheadMs);
    count(bucket.latency, point.latencyMs);
  }

  /** A committed finish (and its reward), in the second it finished in. */
  addFinish(rollout: RolloutRecord): void {
    const bucket = this.#bucket(Math.floor((rollout.finishedAt ?? Date.now()) / 1000));
    bucket.finished++;
    if (typeof rollout.reward === "number" && Number.isFinite(rollout.reward)) {
      bucket.rewarded++;
      bucket.rewardSum += rollout.reward;
    }
  }

  /** Writes what was added up (also before a read, and on close). A failed write drops it: charts, not captures. */
  flush(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#pending.size === 0) return;
    const pending = this.#pending;
    this.#pending = new Map();
    try {
      this.#root.transactionSync(() => {
        for (const [second, delta] of pending) {
          addStored(this.#tables.seconds, second, delta);
          addStored(this.#tables.minutes, Math.floor(second / 60), delta);
        }
      });
    } catch {
      // a full disk refuses this as it refuses calls; the calls themselves were committed
    }
  }
}

function percentileOf(histogram: Map<number, number>, total: number, q: number): number | null {
  if (total === 0) return null;
  const rank = Math.ceil((q / 100) * total);
  let seen = 0;
  for (const bin of [...histogram.keys()].sort((a, b) => a - b)) {
    seen += histogram.get(bin)!;
    if (seen >= rank) return binValue(bin);
  }
  return null;
}

function merge(into: Map<number, number>, histogram: Record<number, number>): void {
  for (const [bin, n] of Object.entries(histogram)) into.set(Number(bin), (into.get(Number(bin)) ?? 0) + n);
}

/** The newest second with anything in it (epoch ms of its start), or null for an empty series. */
export function lastActivity(table: SeriesTable): number | null {
  for (const second of table.getKeys({ reverse: true, limit: 1 })) return second * 1000;
  return null;
}

/**
 * The `windows` windows of `stepMs` (a whole number of seconds) up to the one that holds `to` (epoch ms), oldest
 * first: one point per window, empty windows included, so a chart's x axis is time. Windows of whole minutes are
 * read from the minutes.
 */
export function readSeries(tables: SeriesTables, to: number, stepMs: number, windows: number): SeriesPoint[] {
  const stepS = Math.max(1, Math.round(stepMs / 1000));
  const first = (Math.floor(to / 1000 / stepS) - windows + 1) * stepS;
  const unit = stepS % 60 === 0 ? 60 : 1;
  const table = unit === 60 ? tables.minutes : tables.seconds;
  const merged = Array.from({ length: windows }, () => ({
    bucket: emptyBucket(),
    overhead: new Map<number, number>(),
    latency: new Map<number, number>(),
  }));
  for (const { key, value } of table.getRange({ start: first / unit, end: (first + windows * stepS) / unit })) {
    const w = merged[Math.floor((key * unit - first) / stepS)]!;
    addBucket(w.bucket, { ...value, overhead: {}, latency: {} });
    merge(w.overhead, value.overhead);
    merge(w.latency, value.latency);
  }
  return merged.map(({ bucket: b, overhead, latency }, i) => ({
    at: (first + i * stepS) * 1000,
    calls: b.calls,
    errors: b.errors,
    promptTokens: b.promptTokens,
    sampledTokens: b.sampledTokens,
    overheadP50: percentileOf(overhead, b.calls, 50),
    overheadP99: percentileOf(overhead, b.calls, 99),
    latencyP50: percentileOf(latency, b.calls, 50),
    latencyP99: percentileOf(latency, b.calls, 99),
    finished: b.finished,
    rewardMean: b.rewarded ? b.rewardSum / b.rewarded : null,
  }));
}
