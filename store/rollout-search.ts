// Searching and paging the rollouts newest first without reading their records: the by-time index ([createdAt, id])
// holds, as its value, the few fields a search looks at (status, group, harness, task), written with the record on
// create and finish. A page is read from a cursor (the last row of the page before); a filtered total scans these
// small values only (10⁵ rollouts in tens of ms), an unfiltered one is the table's entry count.
import type { RolloutRecord } from "./records.ts";

/** What the by-time index holds of a rollout: [status, group, harness, task]. `true`: written before it held them. */
export type RolloutIndexEntry = [string, string | null, string | null, string | null] | true;

export interface RolloutFilter {
  /** Exact status. */
  status?: string;
  /** Exact group. */
  group?: string;
  /** Case-insensitive text found in the id, group, harness, task or status. */
  query?: string;
}

export interface RolloutPageRequest extends RolloutFilter {
  limit?: number;
  /** A page's `nextCursor`: the rollouts after it. */
  cursor?: string;
}

export interface RolloutPage {
  rollouts: RolloutRecord[];
  /** Rollouts that match the filter in the whole store. */
  total: number;
  /** Where the next page starts; null on the last one. */
  nextCursor: string | null;
}

export function rolloutIndexEntry(rollout: RolloutRecord): Exclude<RolloutIndexEntry, true> {
  return [rollout.status, rollout.group, rollout.harness, rollout.task];
}

export const isFiltered = (filter: RolloutFilter) => Boolean(filter.status || filter.group || filter.query);

/** Whether the rollout (`id`, its index entry) matches; an entry written before it held fields reads the record. */
export function entryMatches(
  id: string,
  entry: RolloutIndexEntry | undefined,
  filter: RolloutFilter,
  record: () => RolloutRecord | undefined,
): boolean {
  let fields: Exclude<RolloutIndexEntry, true>;
  if (entry === true || entry === undefined) {
    const r = record();
    if (!r) return false;
    fields = rolloutIndexEntry(r);
  } else fields = entry;
  const [status, group, harness, task] = fields;
  if (filter.status && status !== filter.status) return false;
  if (filter.group && group !== filter.group) return false;
  if (!filter.query) return true;
  const query = filter.query.toLowerCase();
  return [id, group, harness, task, status].some((v) => v !== null && v.toLowerCase().includes(query));
}

// A cursor is `createdAt.id`: createdAt holds no dot, so the first one splits it.
export function encodeCursor([createdAt, id]: [number, string]): string {
  return `${createdAt}.${id}`;
}

export function decodeCursor(cursor: string): [number, string] | null {
  const dot = cursor.indexOf(".");
  const createdAt = Number(cursor.slice(0, dot));
  if (dot < 1 || !Number.isSafeInteger(createdAt) || createdAt < 0) return null;
  return [createdAt, cursor.slice(dot + 1)];
}
