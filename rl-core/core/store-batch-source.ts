// Batches in the core's store, oldest first, as the trainer service takes them.
import type { CoreStore, StoredBatch } from "./core-store.ts";
import type { BatchSource } from "./served-batches.ts";

export class StoreBatchSource implements BatchSource {
  readonly #store: CoreStore;
  readonly #ids: number[];
  constructor(store: CoreStore) {
    this.#store = store;
    this.#ids = store.batchIds();
  }
  get size(): number {
    return this.#ids.length;
  }
  add(id: number): void {
    this.#ids.push(id);
  }
  next(exclude: ReadonlySet<number>): number | null {
    return this.#ids.find((id) => !exclude.has(id)) ?? null;
  }
  get(id: number): StoredBatch | undefined {
    return this.#store.getBatch(id);
  }
  async remove(ids: readonly number[]): Promise<number> {
    const removed = await this.#store.removeBatches(ids);
    for (const id of ids) {
      const at = this.#ids.indexOf(id);
      if (at >= 0) this.#ids.splice(at, 1);
    }
    return removed;
  }
}
