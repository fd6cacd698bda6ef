// Group membership, decided once per rollout at intake, in stream order, from (name, round) and the declared size:
// nothing that happens later (when a group is taken for processing, a timeout, a restart) moves a rollout.
//
// A group is a *generation* of a name:
//   - explicit round: a rollout created with `round` R belongs to generation R of its name (key `group:NAME@R`);
//   - fill order: without a round, the k-th rollout of the name (k = 1, 2, ... in stream order) belongs to generation
//     ceil(k / size) (key `group:NAME#G`), size being the first declared `group_size` / `groupSize` / `n` of the
//     generation, else --group-size. A generation of unknown size (0) takes every rollout of the name until it is
//     processed at the group timeout: the one case where membership follows timing (declare a size to avoid it).
// A generation is processed when it holds its size, or at the group timeout (from its first rollout) as it is.
// Processed short of its size (k of n), the rest of its n rollouts still belong to it — they were assigned to it by
// count or round — and arrive after it was trained: they form its next *part*, the late rollouts of that generation
// (`+late`, `+late2`, ...; complete at the n − k still missing), counted and reported, never dropped. An explicit
// round that receives more than its size drops the extra rollouts (`over_size`). A rollout without a group is a
// group of one.
import type { PendingRollout } from "./core-store.ts";

export interface PendingGroup {
  key: string;
  /** The group name ("" for a rollout without one). */
  name: string;
  generation: number;
  /** The explicit round (0: fill order). */
  round: number;
  late: boolean;
  size: number;
  firstAt: number;
  /** A group recorded by the core a replay follows: complete at its recorded members, never by the timeout. */
  planned: boolean;
  /** rollout id → where it came from (for the ack). */
  members: Map<string, { gateway: string; cursor: number }>;
}

/** What the core keeps per generation (persisted with the pending rollouts and processed groups). */
export interface GenerationState {
  /** The size the generation is complete at (0 = unknown: processed at the group timeout). */
  size: number;
  /** Rollouts assigned to it so far. */
  assigned: number;
  /** Rollouts in its parts processed so far, and how many parts were processed. */
  processed: number;
  parts: number;
}

/** What the core keeps per group name: the generation its next rollout without a round fills. */
export interface NameState {
  fill: number;
}

export interface Assignment {
  key: string;
  generation: number;
  round: number;
  late: boolean;
  /** The size the rollout's group (part) is complete at; 0 = unknown. */
  size: number;
  /** An explicit round already holding its size: the rollout is dropped as `over_size`. */
  overSize: boolean;
}

/** The states an assignment changed, to persist with the rollout. */
export interface GroupStates {
  name: { group: string; state: NameState } | null;
  generation: { base: string; state: GenerationState } | null;
}

const LATE = /\+late(\d*)$/;

/** `NAME#G` (fill order) or `NAME@R` (explicit round): a generation's key without its part. */
export function generationBase(name: string, generation: number, round: number): string {
  return round > 0 ? `${name}@${round}` : `${name}#${generation}`;
}

/** The key of part `part` of a generation (0: the generation itself, 1: its late rollouts, 2: `+late2`, ...). */
export function partKey(base: string, part: number): string {
  return `group:${base}${part === 0 ? "" : part === 1 ? "+late" : `+late${part}`}`;
}

function baseOf(key: string): { base: string; part: number } {
  const m = LATE.exec(key);
  const part = m ? (m[1] ? Number(m[1]) : 1) : 0;
  return { base: key.slice("group:".length, m ? m.index : undefined), part };
}

/** The group size a rollout's metadata declares (group_size, groupSize or n), 0 when none. */
export function declaredGroupSize(metadata: Record<string, unknown>): number {
  for (const key of ["group_size", "groupSize", "n"]) {
    const v = metadata[key];
    if (typeof v === "number" && Number.isInteger(v) && v > 0) return v;
  }
  return 0;
}

/** A NameState as stored by this or an earlier version (which kept `generation`, the one being filled). */
export function readNameState(value: unknown): NameState {
  const v = (value ?? {}) as { fill?: unknown; generation?: unknown };
  const fill = typeof v.fill === "number" ? v.fill : typeof v.generation === "number" ? v.generation : 1;
  return { fill: Math.max(1, fill) };
}

export class GroupTracker {
  readonly #groups = new Map<string, PendingGroup>();
  readonly #byRollout = new Map<string, string>();
  readonly #names: Map<string, NameState>;
  readonly #generations: Map<string, GenerationState>;
  readonly #defaultSize: number;
  readonly #timeoutMs: number;

  constructor(options: {
    defaultSize: number;
    timeoutMs: number;
    names?: Map<string, NameState>;
    generations?: Map<string, GenerationState>;
  }) {
    this.#defaultSize = options.defaultSize;
    this.#timeoutMs = options.timeoutMs;
    this.#names = options.names ?? new Map();
    this.#generations = options.generations ?? new Map();
  }

  get size(): number {
    return this.#groups.size;
  }

  has(rolloutId: string): boolean {
    return this.#byRollout.has(rolloutId);
  }

  /**
   * The group a new rollout belongs to; advances its name's and generation's state (`states()` gives them to
   * persist with the rollout). Synchronous, called in stream order: this is where membership is decided.
   */
  assign(name: string, rolloutId: string, declaredSize: number, round = 0): Assignment {
    if (!name) return { key: `rollout:${rolloutId}`, generation: 0, round: 0, late: false, size: 1, overSize: false };
    const explicit = round > 0;
    const nameState = this.#names.get(name) ?? { fill: 1 };
    const generation = explicit ? round : nameState.fill;
    const base = generationBase(name, generation, round);
    const gen = { ...(this.#generations.get(base) ?? { size: 0, assigned: 0, processed: 0, parts: 0 }) };
    if (!gen.size) gen.size = declaredSize || this.#defaultSize;
    const overSize = explicit && gen.size > 0 && gen.assigned >= gen.size;
    if (!overSize) gen.assigned++;
    if (!explicit && gen.size > 0 && gen.assigned >= gen.size) this.#names.set(name, { fill: generation + 1 });
    else if (!this.#names.has(name)) this.#names.set(name, nameState);
    this.#generations.set(base, gen);
    const part = gen.parts;
    return {
      key: partKey(base, part),
      generation,
      round: explicit ? round : 0,
      late: part > 0,
      size: gen.size > 0 ? gen.size - gen.processed : 0,
      overSize,
    };
  }

  /** The current state of a group's name and generation, to persist (null parts: a rollout without a group). */
  states(name: string, groupKey: string): GroupStates {
    if (!name || !groupKey.startsWith("group:")) return { name: null, generation: null };
    const { base } = baseOf(groupKey);
    const gen = this.#generations.get(base);
    return {
      name: { group: name, state: { ...(this.#names.get(name) ?? { fill: 1 }) } },
      generation: gen ? { base, state: { ...gen } } : null,
    };
  }

  /** A re-delivered pending rollout: ack it where it came from this time. */
  resource(rolloutId: string, gateway: string, cursor: number): void {
    const g = this.#groups.get(this.#byRollout.get(rolloutId) ?? "");
    g?.members.set(rolloutId, { gateway, cursor });
  }

  add(p: PendingRollout, planned = false): PendingGroup {
    let g = this.#groups.get(p.groupKey);
    if (!g) {
      g = {
        key: p.groupKey,
        name: p.group,
        generation: p.generation,
        round: p.round ?? 0,
        late: p.late,
        size: p.declaredSize,
        firstAt: p.receivedAt,
        planned,
        members: new Map(),
      };
      this.#groups.set(p.groupKey, g);
    }
    // A part whose size was unknown takes the first one declared.
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
      else if (!g.planned && now - g.firstAt >= this.#timeoutMs) out.push({ key: g.key, by: "timeout" });
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

  /**
   * Pending rollouts from `gateway` at these cursors, taken out of their groups (the gateway gave them to another
   * core); returns their ids.
   */
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
   * Takes a group (part) out for processing. Later rollouts of its generation form its next part; a fill-order
   * generation of unknown size closes here (the name's next rollout opens the next generation).
   */
  take(key: string): PendingGroup | undefined {
    const g = this.#groups.get(key);
    if (!g) return undefined;
    this.#groups.delete(key);
    for (const id of g.members.keys()) this.#byRollout.delete(id);
    if (!g.name) return g;
    const { base, part } = baseOf(key);
    const gen = this.#generations.get(base) ?? { size: 0, assigned: g.members.size, processed: 0, parts: 0 };
    gen.processed += g.members.size;
    gen.parts = Math.max(gen.parts, part + 1);
    this.#generations.set(base, gen);
    if (!g.round && !gen.size && this.#names.get(g.name)?.fill === g.generation)
      this.#names.set(g.name, { fill: g.generation + 1 });
    return g;
  }
}
