// The batches trainers hold (served, not yet acked) and what the core keeps per batch until its ack: the tree view
// of a batch served or reported in the tree layout, and the logprobs reported for it (policy, and the reference
// policy's for KL). Leases (batch-leases.ts), reports (logprob-reports.ts) and advantages on request
// (advantage-requests.ts) read batches here.
import { float32s, LinkError, uint8s, type BatchMessage } from "../../protocol/index.ts";
import type { StoredBatch } from "./core-store.ts";
import { BATCH_LAYOUTS, batchTreeView, treeToRows, type BatchLayout, type TreeView } from "./tree-layout.ts";

/** Where batches come from: the core's store, or a synthetic source (bench). */
export interface BatchSource {
  /** The oldest batch id not in `exclude`, or null. */
  next(exclude: ReadonlySet<number>): number | null;
  get(id: number): StoredBatch | undefined;
  remove(ids: readonly number[]): Promise<number>;
  readonly size: number;
}

/** A stored batch as trainers get it: each row's group key goes with it, its group's statistics stay in the core. */
export function batchMessage(b: StoredBatch): BatchMessage {
  return { ...b, rowInfo: b.rowInfo.map(({ signal: _s, context: _c, ...info }) => info) };
}

/** The layout a trainer asked for, else `fallback` (the core's). */
export function layoutOf(asked: string | undefined, fallback: BatchLayout): BatchLayout {
  const layout = (asked || fallback) as BatchLayout;
  if (!BATCH_LAYOUTS.includes(layout))
    throw new LinkError("RLGATE_BAD_REQUEST", `layout must be one of ${BATCH_LAYOUTS.join(", ")}, not '${asked}'`);
  return layout;
}

export class ServedBatches {
  readonly source: BatchSource;
  /** Logprobs reported for unacked batches: the policy's and the reference policy's (for KL). */
  readonly reported = new Map<number, { policy?: Float32Array; ref?: Float32Array }>();
  /** Tree views of unacked batches served or reported in the tree layout. */
  readonly #views = new Map<number, TreeView>();

  constructor(source: BatchSource) {
    this.source = source;
  }

  /** An unacked batch, or NOT_FOUND. */
  get(id: number): StoredBatch {
    const batch = this.source.get(id);
    if (!batch)
      throw new LinkError(
        "RLGATE_NOT_FOUND",
        `no batch ${id} (acked already? report logprobs before acking, or with ack: true)`,
      );
    return batch;
  }

  view(batch: StoredBatch): TreeView {
    let view = this.#views.get(batch.batchId);
    if (!view) this.#views.set(batch.batchId, (view = batchTreeView(batchMessage(batch))));
    return view;
  }

  /**
   * A trainer's per-token array in the rows layout, and whether it came in the tree layout (told by its count: where
   * both layouts have as many tokens they are the same order, no node being shared).
   */
  asRows(batch: StoredBatch, bytes: Uint8Array, what: string): { values: Float32Array; tree: TreeView | null } {
    const values = float32s(bytes, what);
    const rows = uint8s(batch.lossMask).length;
    if (values.length === rows || !values.length) return { values, tree: null };
    const view = this.view(batch);
    if (values.length !== view.size)
      throw new LinkError(
        "RLGATE_BAD_REQUEST",
        `${what} has ${values.length} entries, the batch has ${rows} tokens (rows layout) or ${view.size} (tree layout)`,
      );
    return { values: treeToRows(view, values), tree: view };
  }

  /** Acked batches: nothing is kept of them. */
  forget(ids: readonly number[]): void {
    for (const id of ids) {
      this.reported.delete(id);
      this.#views.delete(id);
    }
  }
}
