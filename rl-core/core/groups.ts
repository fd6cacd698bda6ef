// Group lifecycle. A group is (name, generation): the rollouts of one `group` name fill generation 1, then 2, ...
// Membership follows the rollout's declared group and the generation's size (the first declared `group_size` /
// `groupSize` / `n` in a rollout's metadata, else --group-size; 0 = unknown), in the order rollouts arrive on the
// stream, never a timer: a generation takes exactly `size` rollouts, and the next one of that name opens the next
// generation. A generation is processed when it holds its size, or when its first rollout has waited the group
// timeout. Processed short of its size (k of n), it leaves n - k *late slots*: the next n - k rollouts of the name
// belong to that generation by count but come after it was trained, so they form a generation of late rollouts of
// their own (`group:NAME#G+late`, complete at n - k), counted and reported, never dropped. A rollout without a
// group is a group of one.
import type { PendingRollout } from "./core-store.ts";

export interface PendingGroup {
  key: string;
  /** The group name ("" for a rollout without one). */
  name: string;
  generation: number;
  late: boolean;
  size: number;
  firstAt: number;
  /** rollout id → where it came from (for the ack). */
  members: Map<string, { gateway: string; cursor: number }>;
}

/** What the core keeps per group name (persisted with the pending rollouts and processed groups). */
export interface NameState {
  /** The generation new rollouts of the name join. */
  generation: number;
  /** Size of that generation (0 = not declared yet). */
  size: number;
  /** Late slots left by the last generation processed short of its size, and which generation that was. */
  owed: number;
  owedOf: number;
  owedSize: number;
}

export interface Assignment {
  key: string;
  generation: number;
  late: boolean;
  /** The size the rollout's group is complete at. */
  size: number;
  /** The name's state after this rollout (null: a rollout without a group). */
  state: NameState | null;
}

export function generationKey(name: string, generation: number, late: boolean): string {
  return `group:${name}#${generation}${late ? "+late" : ""}`;
}

/** The group size a rollout's metadata declares (group_size, groupSize or n), 0 when none. */
export function declaredGroupSize(metadata: Record<string, unknown>): number {
  for (const key of ["group_size", "groupSize", "n"]) {
    const v = metadata[key];
    if (typeof v === "number" && Number.isInteger(v) && v > 0) return v;
  }
  return 0;
}

export class GroupTracker {
  readonly #groups = new Map<string, PendingGroup>();
  readonly #byRollout = new Map<string, string>();
  readonly #names: Map<string, NameState>;
  readonly #defaultSize: number;
  readonly #timeoutMs: number;

  constructor(options: { defaultSize: number; timeoutMs: number; names?: Map<string, NameState> }) {
    this.#defaultSize = options.defaultSize;
    this.#timeoutMs = options.timeoutMs;
    this.#names = options.names ?? new Map();
  }

  get size(): number {
    return this.#groups.size;
  }

  has(rolloutId: string): boolean {
    return this.#byRollout.has(rolloutId);
  }

  /** The generation a new rollout of `name` joins (advances the name's state; persist `state` with the rollout). */
  assign(name: string, rolloutId: string, declaredSize: number): Assignment {
    if (!name) return { key: `rollout:${rolloutId}`, generation: 0, late: false, size: 1, state: null };
    const state = { ...(this.#names.get(name) ?? { generation: 1, size: 0, owed: 0, owedOf: 0, owedSize: 0 }) };
    let assignment: Assignment;
    if (state.owed > 0) {
      state.owed--;
      assignment = {
        key: generationKey(name, state.owedOf, true),
        generation: state.owedOf,
        late: true,
        size: state.owedSize,
        state,
      };
    } else {
      if (!state.size) state.size = declaredSize || this.#defaultSize;
      assignment = {
        key: generationKey(name, state.generation, false),
        generation: state.generation,
        late: false,
        size: state.size,
        state,
      };
    }
    this.#names.set(name, state);
    return assignment;
  }

  /** A re-delivered pending rollout: ack it where it came from this time. */
  resource(rolloutId: string, gateway: string, cursor: number): void {
    const g = this.#groups.get(this.#byRollout.get(rolloutId) ?? "");
    g?.members.set(rolloutId, { gateway, cursor });
  }

  add(p: PendingRollout): PendingGroup {
    let g = this.#groups.get(p.groupKey);
    if (!g) {
      g = {
        key: p.groupKey,
        name: p.group,
        generation: p.generation,
        late: p.late,
        size: p.declaredSize,
        firstAt: p.receivedAt,
        members: new Map(),
      };
      this.#groups.set(p.groupKey, g);
    }
    // A generation whose size was unknown takes the first one declared.
    if (!g.size && p.declaredSize) g.size = p.declaredSize;
    g.firstAt = Math.min(g.firstAt, p.receivedAt);
    g.members.set(p.rolloutId, { gateway: p.gateway, cursor: p.cursor });
    this.#byRollout.set(p.rolloutId, p.groupKey);
    return g;
  }

  isComplete(g: PendingGroup): boolean {
    return g.size > 0 && g.members.size >= g.size;
  }

  /** Groups complete by size, then groups past the timeout. */
  due(now: number): Array<{ key: string; by: "size" | "timeout" }> {
    const out: Array<{ key: string; by: "size" | "timeout" }> = [];
    for (const g of this.#groups.values()) {
      if (this.isComplete(g)) out.push({ key: g.key, by: "size" });
      else if (now - g.firstAt >= this.#timeoutMs) out.push({ key: g.key, by: "timeout" });
    }
    return out;
  }

  /** Cursors of the pending rollouts that came from `gateway` (what the core holds unacked there). */
  cursorsFrom(gateway: string): number[] {
    const out: number[] = [];
    for (const g of this.#groups.values())
      for (const m of g.members.values()) if (m.gateway === gateway) out.push(m.cursor);
    return out;
  }

  /** Pending rollouts from `gateway` at these cursors, taken out of their groups; returns their ids. */
  remove(gateway: string, cursors: ReadonlySet<number>): string[] {
    const removed: string[] = [];
    for (const g of this.#groups.values()) {
      for (const [id, m] of g.members) {
        if (m.gateway !== gateway || !cursors.has(m.cursor)) continue;
        g.members.delete(id);
        this.#byRollout.delete(id);
        removed.push(id);
      }
      if (g.members.size === 0) this.#groups.delete(g.key);
    }
    return removed;
  }

  /**
   * Takes a group out for processing. Its name moves on: the next rollout opens the next generation, or, when this
   * generation is short of its size, fills one of the late slots it leaves. Returns the name's new state to persist
   * with the group.
   */
  take(key: string): { group: PendingGroup; state: NameState | null } | undefined {
    const g = this.#groups.get(key);
    if (!g) return undefined;
    this.#groups.delete(key);
    for (const id of g.members.keys()) this.#byRollout.delete(id);
    if (!g.name) return { group: g, state: null };
    const state = {
      ...(this.#names.get(g.name) ?? { generation: g.generation, size: 0, owed: 0, owedOf: 0, owedSize: 0 }),
    };
    if (g.late) {
      // Late rollouts still missing then are not waited for: the name's next rollouts open its next generation.
      if (state.owedOf === g.generation) state.owed = 0;
    } else if (state.generation === g.generation) {
      state.generation++;
      state.size = 0;
      const missing = g.size > 0 ? g.size - g.members.size : 0;
      if (missing > 0) Object.assign(state, { owed: missing, owedOf: g.generation, owedSize: missing });
    }
    this.#names.set(g.name, state);
    return { group: g, state };
  }
}
