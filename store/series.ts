// What the live page's charts show of a whole run, kept as it happens: per second of wall time, the calls that
// started in it (count, failures, prompt and sampled tokens, rlgate's overhead and the call's latency as log-scale
// histograms) and the rollouts that finished in it (count, reward sum). A bucket is read, added to and written back
// inside the transaction that commits its calls (one read and one write per second touched by the batch, not per
// call), so gateway workers sharing the store add to one series. A chart of 10⁵ rollouts reads at most one record per
// second of the window asked for, never a call.
import type { Database } from "lmdb";
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

/** Second (epoch s) → its bucket. */
export type SeriesTable = Database<SeriesBucket, number>;

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

function readBucket(table: SeriesTable, second: number): SeriesBucket {
  const stored = table.get(second);
  return stored ? { ...stored, overhead: { ...stored.overhead }, latency: { ...stored.latency } } : emptyBucket();
}

function count(histogram: Record<number, number>, ms: number): void {
  const bin = binOf(ms);
  histogram[bin] = (histogram[bin] ?? 0) + 1;
}

/** Inside a write transaction: adds a batch of committed calls to their seconds. */
export function addCalls(table: SeriesTable, points: readonly CallPoint[]): void {
  const touched = new Map<number, SeriesBucket>();
  for (const point of points) {
    let bucket = touched.get(point.second);
    if (!bucket) touched.set(point.second, (bucket = readBucket(table, point.second)));
    bucket.calls++;
    if (point.failed) bucket.errors++;
    bucket.promptTokens += point.promptTokens;
    bucket.sampledTokens += point.sampledTokens;
    count(bucket.overhead, point.overheadMs);
    count(bucket.latency, point.latencyMs);
  }
  for (const [second, bucket] of touched) void table.put(second, bucket);
}

/** Inside a write transaction: adds a finished rollout (and its reward) to the second it finished in. */
export function addFinish(table: SeriesTable, rollout: RolloutRecord): void {
  const second = Math.floor((rollout.finishedAt ?? Date.now()) / 1000);
  const bucket = readBucket(table, second);
  bucket.finished++;
  if (typeof rollout.reward === "number" && Number.isFinite(rollout.reward)) {
    bucket.rewarded++;
    bucket.rewardSum += rollout.reward;
  }
  void table.put(second, bucket);
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
 * first: one point per window, empty windows included, so a chart's x axis is time.
 */
export function readSeries(table: SeriesTable, to: number, stepMs: number, windows: number): SeriesPoint[] {
  const stepS = Math.max(1, Math.round(stepMs / 1000));
  const first = (Math.floor(to / 1000 / stepS) - windows + 1) * stepS;
  const merged = Array.from({ length: windows }, () => ({
    bucket: emptyBucket(),
    overhead: new Map<number, number>(),
    latency: new Map<number, number>(),
  }));
  for (const { key, value } of table.getRange({ start: first, end: first + windows * stepS })) {
    const w = merged[Math.floor((key - first) / stepS)]!;
    const b = w.bucket;
    b.calls += value.calls;
    b.errors += value.errors;
    b.promptTokens += value.promptTokens;
    b.sampledTokens += value.sampledTokens;
    b.finished += value.finished;
    b.rewarded += value.rewarded;
    b.rewardSum += value.rewardSum;
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
