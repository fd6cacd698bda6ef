// A store holding only selected finished rollouts, in the order they finished: what `rlgate replay deliver` serves to
// an RL core, so that a trainer bug can be reproduced on the exact data without re-running rollouts.
import { randomBytes } from "node:crypto";
import type { RolloutRecord } from "../store/records.ts";
import { Store } from "../store/store.ts";
import type { RolloutSource } from "./source.ts";

export interface SnapshotResult {
  rollouts: number;
  calls: number;
  /** Finished-log cursors of the copied rollouts, in order. */
  cursors: number[];
}

/**
 * The key a rollout gets in the snapshot: a fresh one. The store indexes rollouts by key, a record read from a
 * gateway's control API has none (the secret is withheld), and the snapshot never serves a harness call, so the
 * original secret has no business in a copy either. Keys travel on no stream message: batches are unchanged.
 */
function snapshotKey(): string {
  return `rlk_snapshot_${randomBytes(18).toString("base64url")}`;
}

/**
 * Copies `rollouts` (finished ones: an open rollout is refused) with their calls into a new store at `dir`, finishing
 * them there in the order given: the snapshot's finished log (what a core reads) keeps that order.
 */
export async function writeSnapshot(
  source: RolloutSource,
  rollouts: readonly RolloutRecord[],
  dir: string,
  onRollout?: () => void,
): Promise<SnapshotResult> {
  const open = rollouts.find((r) => r.status === "open");
  if (open) throw new Error(`rollout ${open.id} is still open: only finished rollouts are delivered`);
  const store = new Store({ path: dir });
  const result: SnapshotResult = { rollouts: 0, calls: 0, cursors: [] };
  try {
    for (const original of rollouts) {
      const rollout = { ...original, key: snapshotKey() };
      await store.putRollout(rollout);
      const calls = await source.calls(rollout.id);
      await Promise.all(calls.map((call) => store.putCall(call)));
      result.cursors.push(await store.finishRollout(rollout));
      result.rollouts++;
      result.calls += calls.length;
      onRollout?.();
    }
    await store.committed();
  } finally {
    await store.close();
  }
  return result;
}
