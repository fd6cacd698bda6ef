// What a store holds and how much of its file it uses (`rlgate store stats`): rollouts, calls, pages in use against
// the file and the pages LMDB will reuse, the oldest rollout, each consumer group's cursor and lag, and what
// retention would remove now. Read in one read snapshot; a serving gateway is not disturbed.
import { statSync } from "node:fs";
import { join } from "node:path";
import type { RootDatabase } from "lmdb";
import { retentionPreview } from "./retention.ts";
import type { StoreTables } from "./store-tables.ts";

export interface ConsumerStats {
  name: string;
  committed: number;
  /** Epoch ms the committed cursor stands for (when the last rollout it covers finished); null before any ack. */
  committedAt: number | null;
  /** Finished rollouts after its cursor: not yet acknowledged by this group. */
  lag: number;
  /** Its cursor bounds retention (it has not acknowledged rollouts older than the window). */
  holdsRetention: boolean;
}

export interface StoreStats {
  path: string;
  rollouts: { open: number; finished: number };
  calls: { total: number; unattributed: number };
  oldestRollout: { id: string; createdAt: number } | null;
  bytes: {
    /** Size of data.mdb on disk (with a write map LMDB grows it to the map size). */
    file: number;
    /** Pages up to the highest one ever used: what the file must hold. */
    used: number;
    /** Pages the tables hold now. */
    live: number;
    /** Pages below the high-water mark that no table holds: LMDB reuses them before growing the file. */
    free: number;
    pageSize: number;
  };
  consumers: ConsumerStats[];
  /** With a window: what a sweep would remove now. */
  retention: {
    retainMs: number;
    rollouts: number;
    calls: number;
    unattributedCalls: number;
    keptBackbones: number;
    heldBy: string | null;
  } | null;
}

interface PageStat {
  treeBranchPageCount: number;
  treeLeafPageCount: number;
  overflowPages: number;
}

const pagesOf = (s: PageStat) => s.treeBranchPageCount + s.treeLeafPageCount + s.overflowPages;

/** How the environment's pages are used, from LMDB's counts (no table is read). */
export interface PageUse {
  pageSize: number;
  /** Pages up to the highest one ever used. */
  used: number;
  /** Pages the tables, the main table, the free list and the two meta pages hold. */
  live: number;
  /** Pages below the high-water mark no table holds: LMDB reuses them before it grows the file. */
  free: number;
}

/** Page use of an environment whose tables are `tables` (every table it has, or `free` counts the missing ones). */
export function pageUse(root: RootDatabase, tables: Iterable<{ getStats(): unknown }>): PageUse {
  const stats = root.getStats() as PageStat & { pageSize: number; lastPageNumber: number; free: PageStat };
  let live = pagesOf(stats) + pagesOf(stats.free) + 2;
  for (const table of tables) live += pagesOf(table.getStats() as PageStat);
  const used = stats.lastPageNumber + 1;
  return { pageSize: stats.pageSize, used, live: Math.min(live, used), free: Math.max(0, used - live) };
}

export function storeStats(
  t: StoreTables,
  path: string,
  options: { retainMs?: number; now?: number } = {},
): StoreStats {
  const now = options.now ?? Date.now();
  // Every table the main table names (a read-only environment opens them without a write).
  const pages = pageUse(
    t.root,
    [...t.root.getKeys()].map((name) => t.root.openDB({ name: String(name) })),
  );
  const finished = t.finishedIds.getCount();
  let oldestRollout: StoreStats["oldestRollout"] = null;
  for (const [createdAt, id] of t.rolloutsByTime.getKeys({ limit: 1 })) oldestRollout = { id, createdAt };
  const preview = options.retainMs === undefined ? null : retentionPreview(t, options.retainMs, now);
  const consumers: ConsumerStats[] = [];
  for (const { key: name, value: committed } of t.cursors.getRange())
    consumers.push({
      name,
      committed,
      committedAt: committed > 0 ? Math.floor(committed / 1000) : null,
      lag: t.finished.getKeysCount({ start: committed + 1 }),
      holdsRetention: preview?.horizon.heldBy === name,
    });
  const unattributed = t.calls.getKeysCount({ start: ["", 0], end: ["", Number.MAX_SAFE_INTEGER] });
  return {
    path,
    rollouts: { open: t.rollouts.getCount() - finished, finished },
    calls: { total: t.calls.getCount(), unattributed },
    oldestRollout,
    bytes: {
      file: statSync(join(path, "data.mdb")).size,
      used: pages.used * pages.pageSize,
      live: pages.live * pages.pageSize,
      free: pages.free * pages.pageSize,
      pageSize: pages.pageSize,
    },
    consumers,
    retention:
      preview === null
        ? null
        : {
            retainMs: options.retainMs!,
            rollouts: preview.rollouts,
            calls: preview.calls,
            unattributedCalls: preview.unattributedCalls,
            keptBackbones: preview.keptBackbones,
            heldBy: preview.horizon.heldBy,
          },
  };
}
