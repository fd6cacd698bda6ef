// The store's LMDB tables by name, for the code that works on whole rollouts across them: retention (which removes a
// rollout from every table) and the stats of `rlgate store stats`. A serving gateway hands its own (Store.tables); a
// command beside it opens the environment read-only (openStoreTablesReadOnly), which a live writer does not mind.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { open, type Database, type RootDatabase } from "lmdb";
import type { RolloutRecord } from "./records.ts";
import type { RolloutIndexEntry } from "./rollout-search.ts";

export interface StoreTables {
  root: RootDatabase;
  rollouts: Database<RolloutRecord, string>;
  keys: Database<string, string>;
  rolloutsByTime: Database<RolloutIndexEntry, [number, string]>;
  calls: Database<unknown, [string, number]>;
  callLog: Database<number, [string, number]>;
  finished: Database<string, number>;
  finishedIds: Database<number, string>;
  deadlines: Database<true, [number, string]>;
  cursors: Database<number, string>;
  consumerState: Database<unknown, [string, string, number | string]>;
  branches: Database<true, [string, string]>;
  /** Trainers' agreement figures and replay reports (reports.ts): counted in stats, never removed by retention. */
  reports: Database;
  /** The charts' figures per second and per minute (series.ts): removed by retention past its window. */
  series: Database;
  seriesMinutes: Database;
  /** Drops what the opening process keeps in memory of a removed rollout. */
  forget(rolloutId: string): void;
}

/** Table names as Store opens them (store.ts). */
const NAMES = {
  rollouts: "rollouts",
  keys: "rollout-keys",
  rolloutsByTime: "rollouts-by-time",
  calls: "calls",
  callLog: "call-log",
  finished: "finished",
  finishedIds: "finished-ids",
  deadlines: "rollout-deadlines",
  cursors: "consumer-cursors",
  consumerState: "consumer-state",
  branches: "branches",
  reports: "reports",
  series: "call-series",
  seriesMinutes: "call-series-minutes",
} as const;

/**
 * Opens a store's environment read-only (a gateway may be writing it: readers never block its writer). A table the
 * store has not created yet (an empty store, or one written before the table existed) reads as empty.
 */
export function openStoreTablesReadOnly(path: string): StoreTables {
  if (!existsSync(join(path, "data.mdb"))) throw new Error(`no store at ${path} (no data.mdb there)`);
  const root = open({ path, readOnly: true, compression: false, maxDbs: 16 });
  const tables: Record<string, unknown> = { root, forget: () => {} };
  // lmdb-js opens no table a read-only environment lacks: it hands back undefined.
  for (const [field, name] of Object.entries(NAMES)) tables[field] = root.openDB({ name }) ?? EMPTY_TABLE;
  return tables as unknown as StoreTables;
}

/** A table that holds nothing (read-only views of a table the store lacks). */
const EMPTY_TABLE = {
  get: () => undefined,
  doesExist: () => false,
  getCount: () => 0,
  getKeysCount: () => 0,
  getRange: () => [],
  getKeys: () => [],
  getStats: () => ({ treeBranchPageCount: 0, treeLeafPageCount: 0, overflowPages: 0, entryCount: 0 }),
};
