// Where replay and export read captured rollouts from: a running gateway's control API, or a store directory
// directly (LMDB allows readers beside a running gateway). Both answer the same records.
import { fromSnakeCase, toSnakeCase } from "../util/json-case.ts";
import { resolve } from "node:path";
import type { CallRecord, RolloutRecord } from "../store/records.ts";
import type { ReplayRecord } from "../store/reports.ts";
import type { Store } from "../store/store.ts";

export interface Selection {
  /** Explicit rollout ids (a missing one is an error). */
  ids?: readonly string[];
  /** Rollouts of this RL group. */
  group?: string;
  /** Rollouts finished (open ones: created) at or after this epoch-ms time. */
  since?: number;
  /** Only finished rollouts (default true: open ones may still take calls). */
  finishedOnly?: boolean;
}

export interface RolloutSource {
  /** Where the records come from, for messages. */
  readonly where: string;
  /**
   * The selected rollouts: the ids in the order given, else in the order they finished (`inFinishOrder`). A record
   * read from a gateway carries no key (the control API withholds it).
   */
  select(selection: Selection): Promise<RolloutRecord[]>;
  calls(rolloutId: string): Promise<CallRecord[]>;
  /**
   * Keeps a replay run's report where the rollouts came from (the store, or the gateway's control API), so the
   * live UI lists it; resolves with its id.
   */
  recordReplay(record: Omit<ReplayRecord, "id">): Promise<number>;
  close(): Promise<void>;
}

export class SourceError extends Error {
  readonly code = "RLGATE_REPLAY_SOURCE";
}

function matches(rollout: RolloutRecord, selection: Selection): boolean {
  if (selection.group !== undefined && rollout.group !== selection.group) return false;
  if (selection.since !== undefined && (rollout.finishedAt ?? rollout.createdAt) < selection.since) return false;
  if (selection.finishedOnly !== false && rollout.status === "open") return false;
  return true;
}

/**
 * Rollouts in the order the gateway finished them: by their finished-log cursor, the order the live stream delivered
 * them in (finished_at is in ms, and many rollouts finish in the same one: ordering by it and the id would replay
 * another order, and a core would form other groups and batches). Rollouts without a cursor (open) come last, by
 * creation, then id.
 */
export function inFinishOrder(
  rollouts: RolloutRecord[],
  cursorOf: (rollout: RolloutRecord) => number | null,
): RolloutRecord[] {
  const cursors = new Map(rollouts.map((r) => [r.id, cursorOf(r)]));
  return rollouts.sort((a, b) => {
    const ca = cursors.get(a.id) ?? null;
    const cb = cursors.get(b.id) ?? null;
    if (ca !== null && cb !== null) return ca - cb;
    if (ca !== null || cb !== null) return ca !== null ? -1 : 1;
    return a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  });
}

/** What the control API adds to a rollout's record in its views; the record is the rest. */
interface RolloutView extends Omit<RolloutRecord, "key"> {
  key?: string;
  finishCursor?: number | null;
  calls?: number;
  baseUrls?: unknown;
}

/** A control API view as a record, and its finished-log cursor. A key the view withheld is left empty. */
function recordOfView(view: RolloutView): { record: RolloutRecord; cursor: number | null } {
  const { finishCursor, calls: _calls, baseUrls: _baseUrls, key, ...rest } = view;
  return { record: { ...rest, key: key ?? "" }, cursor: finishCursor ?? null };
}

class StoreSource implements RolloutSource {
  readonly where: string;
  readonly #store: Store;
  constructor(store: Store, dir: string) {
    this.#store = store;
    this.where = `the store at ${dir}`;
  }
  async select(selection: Selection): Promise<RolloutRecord[]> {
    if (selection.ids?.length) {
      return selection.ids.map((id) => {
        const rollout = this.#store.getRollout(id);
        if (!rollout) throw new SourceError(`no rollout '${id}' in ${this.where}`);
        return rollout;
      });
    }
    const selected = this.#store.listRollouts({ group: selection.group }).filter((r) => matches(r, selection));
    return inFinishOrder(selected, (r) => this.#store.finishCursor(r.id));
  }
  async calls(rolloutId: string): Promise<CallRecord[]> {
    return this.#store.listCalls(rolloutId);
  }

  async recordReplay(record: Omit<ReplayRecord, "id">): Promise<number> {
    return (await this.#store.putReplay(record)).id;
  }
  #closed: Promise<void> | null = null;
  close(): Promise<void> {
    this.#closed ??= this.#store.close();
    return this.#closed;
  }
}

class GatewaySource implements RolloutSource {
  readonly where: string;
  readonly #url: string;
  readonly #headers: Record<string, string>;
  constructor(url: string, token: string | undefined) {
    this.#url = url.replace(/\/+$/, "");
    this.#headers = token ? { authorization: `Bearer ${token}` } : {};
    this.where = `the gateway at ${this.#url}`;
  }
  async #get(path: string, post?: unknown): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(
        `${this.#url}${path}`,
        post === undefined
          ? { headers: this.#headers }
          : {
              method: "POST",
              headers: { ...this.#headers, "content-type": "application/json" },
              body: JSON.stringify(toSnakeCase(post)),
            },
      );
    } catch (error) {
      throw new SourceError(
        `cannot reach ${this.where} (${(error as Error).message}); start it, pass --gateway, or read a store with --data`,
      );
    }
    const text = await res.text();
    let body: { error?: { message?: string } } | undefined;
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      throw new SourceError(
        `${this.where} answered ${path} with HTTP ${res.status} and no JSON: ${text.slice(0, 200)}`,
      );
    }
    if (!res.ok) throw new SourceError(`${this.where}: ${body?.error?.message ?? `HTTP ${res.status}`}`);
    // The control API speaks snake_case; the records are read back under their TypeScript names.
    return fromSnakeCase(body);
  }
  async select(selection: Selection): Promise<RolloutRecord[]> {
    if (selection.ids?.length) {
      const views = await Promise.all(
        selection.ids.map((id) => this.#get(`/api/rollouts/${encodeURIComponent(id)}`) as Promise<RolloutView>),
      );
      return views.map((view) => recordOfView(view).record);
    }
    const query = selection.group !== undefined ? `?group=${encodeURIComponent(selection.group)}` : "";
    const { rollouts } = (await this.#get(`/api/rollouts${query}`)) as { rollouts: RolloutView[] };
    const read = rollouts.map(recordOfView).filter(({ record }) => matches(record, selection));
    const cursors = new Map(read.map(({ record, cursor }) => [record.id, cursor]));
    return inFinishOrder(
      read.map(({ record }) => record),
      (r) => cursors.get(r.id) ?? null,
    );
  }
  async calls(rolloutId: string): Promise<CallRecord[]> {
    const { calls } = (await this.#get(`/api/rollouts/${encodeURIComponent(rolloutId)}/calls`)) as {
      calls: CallRecord[];
    };
    return calls;
  }

  async recordReplay(record: Omit<ReplayRecord, "id">): Promise<number> {
    return ((await this.#get("/api/replays", record)) as { id: number }).id;
  }

  async close(): Promise<void> {}
}

export interface SourceOptions {
  /** A store directory to read directly. */
  data?: string;
  /** A running gateway's URL (used when `data` is not given). */
  gateway?: string;
  token?: string;
}

export async function openSource(options: SourceOptions): Promise<RolloutSource> {
  if (options.data) {
    const dir = resolve(options.data);
    const { existsSync } = await import("node:fs");
    if (!existsSync(dir)) throw new SourceError(`no store at ${dir} (--data)`);
    const { Store } = await import("../store/store.ts");
    return new StoreSource(new Store({ path: dir }), dir);
  }
  return new GatewaySource(options.gateway ?? "http://127.0.0.1:8700", options.token);
}

/**
 * `--since` as epoch ms: an ISO date or time (`2026-12-01T14:00Z`), epoch milliseconds, or a duration ago
 * (`90s`, `30m`, `2h`, `1d`).
 */
export function parseSince(value: string, now = Date.now()): number {
  const ago = /^(\d+(?:\.\d+)?)(s|m|h|d)$/.exec(value.trim());
  if (ago) return now - Number(ago[1]) * { s: 1e3, m: 6e4, h: 3.6e6, d: 8.64e7 }[ago[2] as "s"];
  if (/^\d{10,}$/.test(value.trim())) return Number(value);
  const at = Date.parse(value);
  if (Number.isNaN(at))
    throw new SourceError(
      `--since takes a date (2026-12-01T14:00Z), epoch ms, or a duration ago (30m, 2h); got '${value}'`,
    );
  return at;
}
