// Batches streamed to trainers at least once: a batch is leased to one stream until acked, and re-delivered if that
// stream ends first; a stream holds at most its max_in_flight unacked batches and waits (woken by notify()) for more.
import type { ServerWritableStream } from "@grpc/grpc-js";
import {
  checkToken,
  errorToStatus,
  isOpen,
  send,
  type BatchMessage,
  type StreamBatchesRequest,
} from "../../protocol/index.ts";
import type { StoredBatch } from "./core-store.ts";
import { batchMessage, layoutOf, type ServedBatches } from "./served-batches.ts";
import { treeBatch, type BatchLayout } from "./tree-layout.ts";

export const DEFAULT_TRAINER_IN_FLIGHT = 2;

export interface BatchLeasesOptions {
  token: string | null;
  /** The layout batches are served in unless a stream asks for another. */
  layout: BatchLayout;
  onAck?(count: number): void;
  onServed?(batch: StoredBatch): void;
}

export class BatchLeases {
  readonly #batches: ServedBatches;
  readonly #options: BatchLeasesOptions;
  /** batch id → stream holding it. */
  readonly #leases = new Map<number, number>();
  readonly #waiters = new Set<() => void>();
  #streams = 0;

  constructor(batches: ServedBatches, options: BatchLeasesOptions) {
    this.#batches = batches;
    this.#options = options;
  }

  get leased(): number {
    return this.#leases.size;
  }

  /** New batches, or leases given back: wakes waiting streams. */
  notify(): void {
    for (const w of [...this.#waiters]) w();
  }

  #wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waiters.add(done);
    });
  }

  readonly streamBatches = (call: ServerWritableStream<StreamBatchesRequest, BatchMessage>): void => {
    const stream = ++this.#streams;
    const mine = new Set<number>();
    let closed = false;
    const release = () => {
      if (closed) return;
      closed = true;
      for (const id of mine) if (this.#leases.get(id) === stream) this.#leases.delete(id);
      this.notify();
    };
    for (const event of ["cancelled", "close", "error", "finish"] as const) call.once(event, release);
    const run = async () => {
      checkToken(call.metadata, this.#options.token);
      const maxInFlight = call.request.maxInFlight > 0 ? call.request.maxInFlight : DEFAULT_TRAINER_IN_FLIGHT;
      const layout = layoutOf(call.request.layout, this.#options.layout);
      while (!closed && isOpen(call)) {
        for (const id of mine) if (this.#leases.get(id) !== stream) mine.delete(id); // acked
        const id = mine.size < maxInFlight ? this.#batches.source.next(new Set(this.#leases.keys())) : null;
        const batch = id === null ? undefined : this.#batches.source.get(id);
        if (id === null || !batch) {
          await this.#wait(1000);
          continue;
        }
        this.#leases.set(id, stream);
        mine.add(id);
        const message = batchMessage(batch);
        await send(call, layout === "tree" ? treeBatch(message, this.#batches.view(batch)) : message);
        this.#options.onServed?.(batch);
      }
    };
    run().then(
      () => {
        release();
        if (isOpen(call)) call.end();
      },
      (error) => {
        release();
        if (isOpen(call)) call.emit("error", errorToStatus(error));
      },
    );
  };

  /** Acks batches: they leave the source and their leases; the number removed. */
  async ack(ids: readonly number[]): Promise<number> {
    const removed = await this.#batches.source.remove(ids);
    for (const id of ids) {
      this.#leases.delete(id);
    }
    this.#batches.forget(ids);
    if (removed) this.#options.onAck?.(removed);
    this.notify();
    return removed;
  }
}
