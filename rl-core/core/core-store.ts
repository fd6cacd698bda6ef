// The RL core's own LMDB store: what it needs to resume after a restart.
//   pending   rollouts received whose group is not complete (not yet acked to the gateway)
//   seen      rollouts processed (a re-delivered one is skipped and acked again)
//   groups    group generations processed
//   names     per group name: the generation its next rollout without a round fills (groups.ts)
//   generations  per generation (`NAME#G` / `NAME@R`): its size, rollouts assigned, parts processed (groups.ts)
//   decisions the groups this core processed and the batches it cut, in order, kept so that a replay can follow
//             them exactly (`rlgate core --follow-decisions`; decisions.ts)
//   ready     trajectories with advantages, waiting to be packed into a batch
//   batches   packed batches, until a trainer acks them
//   meta      the next batch id; the core's member name in consumer groups
// A group's rows, its rollouts' `seen` marks and the removal of its pending rollouts commit in one transaction,
// and so do a batch and the removal of its rows: a crash leaves either the before or the after. Inside a transaction
// callback a put or remove is written at once; its promise is the transaction's, awaited once (hence `void`).
import { open, type Database, type RootDatabase } from "lmdb";
import type { BatchMessage, CallInfo, RowInfo } from "../../protocol/index.ts";
import type { Decision } from "./decisions.ts";
import { readNameState, type GenerationState, type GroupStates, type NameState } from "./groups.ts";

/** A rollout as received from a gateway (arrays as little-endian bytes, as on the wire). */
export interface PendingRollout {
  rolloutId: string;
  /** The group generation it belongs to (groups.ts): `group:NAME#GEN`, `group:NAME#GEN+late` or `rollout:ID`. */
  groupKey: string;
  group: string;
  /** 1, 2, ... (0: no group): the explicit round, or the name's fill-order generation. */
  generation: number;
  /** The round the rollout was created with (0: none; its generation is by fill order). */
  round?: number;
  /** Came after its generation was processed short of its size (its group is the late ones of that generation). */
  late: boolean;
  task: string;
  harness: string;
  status: string;
  reward: number | null;
  /** The size its group is complete at: declared (metadata group_size / groupSize / n) or --group-size; 0 = unknown. */
  declaredSize: number;
  flagged: boolean;
  flagReasons: string[];
  oversize: boolean;
  rows: number;
  offsets: Uint8Array;
  tokenIds: Uint8Array;
  lossMask: Uint8Array;
  logprobs: Uint8Array;
  trajectoryIds: string[];
  segments: string[];
  trained: Uint8Array;
  calls: CallInfo[];
  /** int32 LE per token: index into `calls`, -1 on context (empty: unknown). */
  callIndex: Uint8Array;
  /** MoE routing replay: the rows' routed experts, aligned with `tokenIds` (absent: none). */
  routing?: RowRouting;
  gateway: string;
  cursor: number;
  receivedAt: number;
}

/** Routed experts aligned with a row's (or rollout's) tokens: [tokens, layers, topK] of `dtype`, little-endian. */
export interface RowRouting {
  data: Uint8Array;
  dtype: "uint8" | "uint16";
  layers: number;
  topK: number;
}

/** How a row's group informs its outcome advantage. */
export type RowSignal = "ok" | "equal" | "none";

/** The kept rollouts of a group, as the outcome estimators see them (one sample each). */
export interface GroupContext {
  rollouts: string[];
  rewards: number[];
  /** Trained tokens of each rollout (all its trained trajectories). */
  tokens: number[];
}

/** One trajectory with its advantages. */
export interface ReadyRow {
  rolloutId: string;
  trajectoryId: string;
  groupKey: string;
  group: string;
  task: string;
  harness: string;
  reward: number;
  segment: string;
  generation: number;
  /** The rollout's explicit round (0: fill order). */
  round?: number;
  late: boolean;
  /** ok: a baseline and different rewards; equal: equal rewards in the group; none: no baseline (alone). */
  signal: RowSignal;
  /** The row's group (for advantages on request over the whole group). */
  context: GroupContext;
  /** The calls that sampled the row's tokens; `callIndex` (int32 LE per token, -1 on context) points here. */
  calls: CallInfo[];
  callIndex: Uint8Array;
  /** MoE routing replay: the row's routed experts, aligned with its tokens (absent: none). */
  routing?: RowRouting;
  finishReason: string;
  policyVersion: string;
  /** Current version minus the row's oldest trained token's, and its stale trained tokens (staleness.ts). */
  staleness?: number;
  staleTokens?: number;
  tokenIds: Uint8Array;
  lossMask: Uint8Array;
  logprobs: Uint8Array;
  advantages: Uint8Array;
}

/** A batch as it is served, with each row's group key, signal and group (for advantages on request). */
export interface StoredBatch extends Omit<BatchMessage, "rowInfo"> {
  rowInfo: Array<RowInfo & { groupKey: string; signal: RowSignal; context: GroupContext }>;
}

export class CoreStore {
  readonly #root: RootDatabase;
  readonly #pending: Database<PendingRollout, string>;
  readonly #seen: Database<number, string>;
  readonly #groups: Database<number, string>;
  readonly #ready: Database<ReadyRow, number>;
  readonly #batches: Database<StoredBatch, number>;
  readonly #meta: Database<number | string, string>;
  readonly #names: Database<NameState, string>;
  readonly #generations: Database<GenerationState, string>;
  readonly #decisions: Database<Decision, number>;
  #nextDecision: number;
  #nextReady: number;
  #nextBatch: number;

  constructor(path: string) {
    // Commit durability as the gateway's store: safe from a process kill; the OS writes to disk on its schedule.
    this.#root = open({ path, compression: false, maxDbs: 12, noSync: true });
    this.#pending = this.#root.openDB({ name: "pending" });
    this.#seen = this.#root.openDB({ name: "seen" });
    this.#groups = this.#root.openDB({ name: "groups" });
    this.#ready = this.#root.openDB({ name: "ready" });
    this.#batches = this.#root.openDB({ name: "batches" });
    this.#meta = this.#root.openDB({ name: "meta" });
    this.#names = this.#root.openDB({ name: "names" });
    this.#generations = this.#root.openDB({ name: "generations" });
    this.#decisions = this.#root.openDB({ name: "decisions" });
    this.#nextDecision = 1;
    for (const key of this.#decisions.getKeys({ reverse: true, limit: 1 })) this.#nextDecision = key + 1;
    this.#nextReady = 1;
    for (const key of this.#ready.getKeys({ reverse: true, limit: 1 })) this.#nextReady = key + 1;
    this.#nextBatch = Math.max(1, Number(this.#meta.get("nextBatch") ?? 1));
  }

  /**
   * The core's name in consumer groups, made by `make` on first use and kept: a gateway keeps a member's rollouts
   * and groups for it by this name while it restarts.
   */
  memberName(make: () => string): string {
    const stored = this.#meta.get("member");
    if (typeof stored === "string" && stored !== "") return stored;
    const name = make();
    this.#meta.putSync("member", name);
    return name;
  }

  /** The core's current policy version as last kept ("" none). */
  policyVersion(): string {
    const stored = this.#meta.get("policyVersion");
    return typeof stored === "string" ? stored : "";
  }

  /** Keeps the current policy version; settles once written (close() waits for every write too). */
  async setPolicyVersion(version: string): Promise<void> {
    await this.#meta.put("policyVersion", version);
  }

  isSeen(rolloutId: string): boolean {
    return this.#seen.get(rolloutId) !== undefined;
  }

  #putStates(states: GroupStates): void {
    if (states.name) void this.#names.put(states.name.group, states.name.state);
    if (states.generation) void this.#generations.put(states.generation.base, states.generation.state);
  }

  /** A received rollout and its group's states, in one transaction. */
  async putPending(rollout: PendingRollout, states: GroupStates): Promise<void> {
    await this.#root.transaction(() => {
      void this.#pending.put(rollout.rolloutId, rollout);
      this.#putStates(states);
    });
  }

  allNames(): Map<string, NameState> {
    return new Map([...this.#names.getRange()].map(({ key, value }) => [key, readNameState(value)]));
  }

  allGenerations(): Map<string, GenerationState> {
    return new Map([...this.#generations.getRange()].map(({ key, value }) => [key, value]));
  }

  /** Every decision this core recorded, in order. */
  decisions(): Decision[] {
    return [...this.#decisions.getRange()].map(({ value }) => value);
  }

  #record(decision: Decision): void {
    void this.#decisions.put(this.#nextDecision++, decision);
  }

  getPending(rolloutId: string): PendingRollout | undefined {
    return this.#pending.get(rolloutId);
  }

  allPending(): PendingRollout[] {
    return [...this.#pending.getRange()].map(({ value }) => value);
  }

  /** Forgets pending rollouts without marking them seen (the gateway gave them to another core). */
  async dropPending(rolloutIds: readonly string[]): Promise<void> {
    await this.#root.transaction(() => {
      for (const id of rolloutIds) void this.#pending.remove(id);
    });
  }

  /** Marks rollouts seen without a group (late, or dropped before grouping). */
  markSeen(rolloutIds: readonly string[]): Promise<void> {
    const now = Date.now();
    return this.#root.transaction(() => {
      for (const id of rolloutIds) {
        void this.#seen.put(id, now);
        void this.#pending.remove(id);
      }
    });
  }

  /** A processed group: its rows become ready, its rollouts seen, the decision recorded. Returns the rows' keys. */
  async commitGroup(
    groupKey: string,
    rolloutIds: readonly string[],
    rows: readonly ReadyRow[],
    states: GroupStates,
    decision: Decision,
  ): Promise<number[]> {
    const now = Date.now();
    const keys = rows.map(() => this.#nextReady++);
    await this.#root.transaction(() => {
      rows.forEach((row, i) => this.#ready.put(keys[i]!, row));
      for (const id of rolloutIds) {
        void this.#seen.put(id, now);
        void this.#pending.remove(id);
      }
      void this.#groups.put(groupKey, now);
      this.#putStates(states);
      this.#record(decision);
    });
    return keys;
  }

  readyKeys(): Array<{ key: number; tokens: number; rolloutId: string; groupKey: string }> {
    return [...this.#ready.getRange()].map(({ key, value }) => ({
      key,
      tokens: value.tokenIds.byteLength / 4,
      rolloutId: value.rolloutId,
      groupKey: value.groupKey,
    }));
  }

  getReady(keys: readonly number[]): ReadyRow[] {
    return keys.map((k) => {
      const row = this.#ready.get(k);
      if (!row) throw new Error(`ready row ${k} is missing`);
      return row;
    });
  }

  nextBatchId(): number {
    return this.#nextBatch++;
  }

  /** A batch id given from outside (a recorded batch a replay follows): later ids are drawn above it. */
  useBatchId(id: number): void {
    this.#nextBatch = Math.max(this.#nextBatch, id + 1);
  }

  /** A packed batch replaces its rows; the cut is recorded (its rollouts, in row order). */
  async commitBatch(batch: StoredBatch, readyKeys: readonly number[]): Promise<void> {
    const rollouts = batch.rowInfo.map((r) => r.rolloutId).filter((id, i, all) => i === 0 || all[i - 1] !== id);
    await this.#root.transaction(() => {
      void this.#batches.put(batch.batchId, batch);
      this.#record({ kind: "batch", batchId: batch.batchId, rollouts, at: batch.createdAtMs });
      for (const k of readyKeys) void this.#ready.remove(k);
      void this.#meta.put("nextBatch", Math.max(this.#nextBatch, batch.batchId + 1));
    });
  }

  getBatch(id: number): StoredBatch | undefined {
    return this.#batches.get(id);
  }

  batchIds(): number[] {
    return [...this.#batches.getKeys()];
  }

  async removeBatches(ids: readonly number[]): Promise<number> {
    let removed = 0;
    await this.#root.transaction(() => {
      for (const id of ids) {
        if (this.#batches.doesExist(id)) {
          void this.#batches.remove(id);
          removed++;
        }
      }
    });
    return removed;
  }

  async close(): Promise<void> {
    await this.#root.committed;
    await this.#root.close();
  }
}
