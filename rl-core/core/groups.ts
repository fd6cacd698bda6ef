// Rollouts waiting for their group. A group is complete when it holds its declared size (the first declared
// `group_size` in a rollout's metadata, else the core's --group-size; 0 = unknown), or when its first rollout
// has waited the group timeout. A rollout without a group is a group of one.
import type { PendingRollout } from "./core-store.ts";

export interface PendingGroup {
  key: string;
  size: number;
  firstAt: number;
  /** rollout id → where it came from (for the ack). */
  members: Map<string, { gateway: string; cursor: number }>;
}

export function groupKeyOf(group: string, rolloutId: string): string {
  return group ? `group:${group}` : `rollout:${rolloutId}`;
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
  readonly #defaultSize: number;
  readonly #timeoutMs: number;

  constructor(options: { defaultSize: number; timeoutMs: number }) {
    this.#defaultSize = options.defaultSize;
    this.#timeoutMs = options.timeoutMs;
  }

  get size(): number {
    return this.#groups.size;
  }

  has(rolloutId: string): boolean {
    return this.#byRollout.has(rolloutId);
  }

  /** A re-delivered pending rollout: ack it where it came from this time. */
  resource(rolloutId: string, gateway: string, cursor: number): void {
    const g = this.#groups.get(this.#byRollout.get(rolloutId) ?? "");
    g?.members.set(rolloutId, { gateway, cursor });
  }

  add(p: PendingRollout): PendingGroup {
    let g = this.#groups.get(p.groupKey);
    if (!g) {
      const single = p.groupKey.startsWith("rollout:");
      g = { key: p.groupKey, size: single ? 1 : p.declaredSize || this.#defaultSize, firstAt: p.receivedAt, members: new Map() };
      this.#groups.set(p.groupKey, g);
    }
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
    for (const g of this.#groups.values()) for (const m of g.members.values()) if (m.gateway === gateway) out.push(m.cursor);
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

  take(key: string): PendingGroup | undefined {
    const g = this.#groups.get(key);
    if (!g) return undefined;
    this.#groups.delete(key);
    for (const id of g.members.keys()) this.#byRollout.delete(id);
    return g;
  }
}
