// The decisions a core made that the data alone does not determine: which rollouts a group was processed with (a
// group taken at its timeout leaves its later rollouts to a part of their own) and where batches were cut (a batch
// timeout cuts a partial batch). The core records both in its store, in the transactions that commit them; a core
// started with `--follow-decisions` (a replay: `rlgate replay deliver`) takes them as its plan, so it forms the same
// groups and cuts the same batches whatever the timing of the replay, and serves bit-equal batches.
import { existsSync, readFileSync, statSync } from "node:fs";
import { open } from "lmdb";
import { StartRefusal } from "../../util/refusal.ts";

export type Decision =
  | {
      kind: "group";
      key: string;
      /** Its rollouts, in the order the estimator saw them. */
      members: string[];
      by: "size" | "timeout" | "plan";
      at: number;
    }
  | {
      kind: "batch";
      batchId: number;
      /** The rollouts whose rows it holds, in row order (a rollout's rows are contiguous). */
      rollouts: string[];
      at: number;
    };

export interface PlannedGroup {
  key: string;
  name: string;
  generation: number;
  round: number;
  late: boolean;
  members: readonly string[];
}

export interface PlannedBatch {
  batchId: number;
  rollouts: readonly string[];
}

/** `group:NAME#G`, `group:NAME@R`, each with an optional `+late`/`+lateK`; null for a rollout's own group. */
function parseGroupKey(key: string): Omit<PlannedGroup, "key" | "members"> | null {
  const m = /^group:(.*)([#@])(\d+)(\+late\d*)?$/s.exec(key);
  if (!m) return null;
  const n = Number(m[3]);
  return { name: m[1]!, generation: n, round: m[2] === "@" ? n : 0, late: m[4] !== undefined };
}

export class DecisionPlan {
  readonly #groups = new Map<string, PlannedGroup>();
  readonly #batches: PlannedBatch[] = [];
  readonly #batched = new Set<string>();
  #next = 0;

  constructor(decisions: readonly Decision[]) {
    for (const d of decisions) {
      if (d.kind === "batch") {
        this.#batches.push({ batchId: d.batchId, rollouts: d.rollouts });
        for (const id of d.rollouts) this.#batched.add(id);
        continue;
      }
      const parsed = parseGroupKey(d.key);
      if (!parsed) continue; // a rollout without a group is a group of one in any case
      const group = { key: d.key, members: d.members, ...parsed };
      for (const id of d.members) this.#groups.set(id, group);
    }
  }

  get groups(): number {
    return new Set(this.#groups.values()).size;
  }

  get batches(): number {
    return this.#batches.length;
  }

  /** The recorded group of a rollout, if the plan has one. */
  groupOf(rolloutId: string): PlannedGroup | undefined {
    return this.#groups.get(rolloutId);
  }

  /** Whether a rollout's rows go into a recorded batch (and wait for it). */
  isBatched(rolloutId: string): boolean {
    return this.#batched.has(rolloutId);
  }

  /** The next recorded batch to build, in recorded order. */
  peekBatch(): PlannedBatch | undefined {
    return this.#batches[this.#next];
  }

  shiftBatch(): void {
    this.#next++;
  }
}

/**
 * The decisions recorded by a core: its store directory (`--data` of that core; read-only, it may be running), or a
 * JSON-lines file with one decision a line.
 */
export function readDecisions(path: string): Decision[] {
  if (!existsSync(path))
    throw new StartRefusal(`--follow-decisions: nothing at ${path} (give a core's --data directory)`);
  if (statSync(path).isFile()) {
    return readFileSync(path, "utf8")
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line, i) => {
        try {
          return JSON.parse(line) as Decision;
        } catch {
          throw new StartRefusal(`--follow-decisions: line ${i + 1} of ${path} is not JSON`);
        }
      });
  }
  let root: ReturnType<typeof open> | null = null;
  try {
    root = open({ path, readOnly: true, maxDbs: 12 });
    const db = root.openDB<Decision, number>({ name: "decisions" });
    return [...db.getRange()].map(({ value }) => value);
  } catch (error) {
    throw new StartRefusal(
      `--follow-decisions: ${path} holds no core decisions (${(error as Error).message}); give a core's --data directory`,
    );
  } finally {
    void root?.close();
  }
}
