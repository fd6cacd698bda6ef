// A store holding only selected finished rollouts, in the order they finished: what `rlgate replay deliver` serves to
// an RL core, so that a trainer bug can be reproduced on the exact data without re-running rollouts.
import type { RolloutRecord } from "../store/records.ts";
import { Store } from "../store/store.ts";
import type { RolloutSource } from "./source.ts";

export interface SnapshotResult {
  rollouts: number;
  calls: number;
  /** Finished-log cursors of the copied rollouts, in order. */
  cursors: number[];
}

/** Copies `rollouts` (finished ones: an open rollout is refused) with their calls into a new store at `dir`. */
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
    for (const rollout of rollouts) {
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
