// The Trainer service (proto/rlgate/v1/trainer.proto): batches streamed to trainers at least once (a batch is
// leased to one stream until acked, and re-delivered if that stream ends first), logprob reports turned into
// consistency figures, and advantages computed for trainers that bring their own values.
import type { sendUnaryData, ServerUnaryCall, ServerWritableStream } from "@grpc/grpc-js";
import { computeAdvantagesAsync, type EstimatorSpec, type NormalizeBy, type RolloutBatch } from "../estimators/index.ts";
import { importanceWeightsAsync } from "../kernels/index.ts";
import {
  bytesOf,
  checkOffsets,
  checkToken,
  errorToStatus,
  float32s,
  int32s,
  isOpen,
  LinkError,
  send,
  uint8s,
  type AckBatchRequest,
  type AdvantageRequest,
  type AdvantageResponse,
  type BatchMessage,
  type Consistency,
  type ConsistencyReport,
  type CoreStatus,
  type LogprobReport,
  type StreamBatchesRequest,
} from "../../protocol/index.ts";
import { indexStrings } from "./batch-packer.ts";
import { consistencyFigures } from "./consistency.ts";
import type { StoredBatch } from "./core-store.ts";

export const DEFAULT_TRAINER_IN_FLIGHT = 2;
const EMPTY = Buffer.alloc(0);

/** Where batches come from: the core's store, or a synthetic source (bench). */
export interface BatchSource {
  /** The oldest batch id not in `exclude`, or null. */
  next(exclude: ReadonlySet<number>): number | null;
  get(id: number): StoredBatch | undefined;
  remove(ids: readonly number[]): Promise<number>;
  readonly size: number;
}

export interface TrainerServiceOptions {
  source: BatchSource;
  token: string | null;
  status(): CoreStatus;
  onConsistency?(figures: Consistency[]): void;
  onAck?(count: number): void;
  onServed?(batch: StoredBatch): void;
}

export function batchMessage(b: StoredBatch): BatchMessage {
  return { ...b, rowInfo: b.rowInfo.map(({ groupKey: _, ...info }) => info) };
}

/** A unary handler: any error becomes its status (the token is checked by handlers()). */
function unaryHandler<Req, Res>(run: (request: Req) => Promise<Res>) {
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
    Promise.resolve()
      .then(() => run(call.request))
      .then(
        (res) => callback(null, res),
        (error) => callback(errorToStatus(error)),
      );
  };
}

export class TrainerService {
  readonly #options: TrainerServiceOptions;
  /** batch id → stream holding it. */
  readonly #leases = new Map<number, number>();
  readonly #waiters = new Set<() => void>();
  #streams = 0;

  constructor(options: TrainerServiceOptions) {
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
      while (!closed && isOpen(call)) {
        for (const id of mine) if (this.#leases.get(id) !== stream) mine.delete(id); // acked
        const id = mine.size < maxInFlight ? this.#options.source.next(new Set(this.#leases.keys())) : null;
        const batch = id === null ? undefined : this.#options.source.get(id);
        if (id === null || !batch) {
          await this.#wait(1000);
          continue;
        }
        this.#leases.set(id, stream);
        mine.add(id);
        await send(call, batchMessage(batch));
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

  async #ack(ids: readonly number[]): Promise<number> {
    const removed = await this.#options.source.remove(ids);
    for (const id of ids) this.#leases.delete(id);
    if (removed) this.#options.onAck?.(removed);
    this.notify();
    return removed;
  }

  #batch(id: number): StoredBatch {
    const batch = this.#options.source.get(id);
    if (!batch) throw new LinkError("RLGATE_NOT_FOUND", `no batch ${id} (acked already? report logprobs before acking, or with ack: true)`);
    return batch;
  }

  readonly ackBatch = unaryHandler<AckBatchRequest, { acked: number }>(async (req) => ({ acked: await this.#ack(req.batchIds) }));

  readonly reportLogprobs = unaryHandler<LogprobReport, ConsistencyReport>(async (req) => {
    const batch = this.#batch(req.batchId);
    const trainer = float32s(req.logprobs, "logprobs");
    const rollout = float32s(batch.logprobs);
    const lossMask = uint8s(batch.lossMask);
    const harnesses = consistencyFigures({
      offsets: int32s(batch.offsets),
      lossMask,
      rollout,
      trainer,
      harness: batch.rowInfo.map((r) => r.harness),
    });
    this.#options.onConsistency?.(harnesses);
    let importance: Uint8Array = EMPTY;
    if (req.importanceCap > 0) {
      importance = bytesOf(await importanceWeightsAsync({ logpOld: trainer, logpRollout: rollout, mask: lossMask, cap: req.importanceCap }));
    }
    const acked = req.ack ? (await this.#ack([req.batchId])) > 0 : false;
    return { batchId: req.batchId, harnesses, importanceWeights: importance, acked };
  });

  readonly computeAdvantages = unaryHandler<AdvantageRequest, AdvantageResponse>(async (req) => {
    const batch = advantageBatch(req, req.batchId ? this.#batch(req.batchId) : null);
    const estimator = req.estimator || "gae";
    let spec: EstimatorSpec;
    const normalize = (req.normalize || "none") as NormalizeBy;
    if (estimator === "gae") {
      const tokens = batch.lossMask.length;
      const values = float32s(req.values, "values");
      if (values.length !== tokens) throw new LinkError("RLGATE_BAD_REQUEST", `values has ${values.length} entries, the batch has ${tokens} tokens`);
      const tokenRewards = req.tokenRewards.byteLength ? float32s(req.tokenRewards, "token_rewards") : undefined;
      const gae = req.gae ?? { gamma: 1, lambda: 1, whiten: true };
      spec = { estimator: "gae", values, tokenRewards, gamma: gae.gamma, lambda: gae.lambda, whiten: gae.whiten, normalize };
    } else if (estimator === "tree") {
      throw new LinkError("RLGATE_BAD_REQUEST", "the tree estimator runs in the core (--estimator tree), not on request");
    } else {
      spec = { estimator, normalize } as EstimatorSpec;
    }
    const res = await computeAdvantagesAsync(batch, spec);
    return {
      advantages: bytesOf(res.advantages),
      returns: res.returns ? bytesOf(res.returns) : EMPTY,
      lossMask: bytesOf(res.lossMask),
    };
  });

  readonly status = unaryHandler<unknown, CoreStatus>(async () => this.#options.status());

  /** The gRPC implementation object (token checks included). */
  handlers() {
    const token = this.#options.token;
    const guard = <T extends (call: ServerUnaryCall<any, any>, cb: sendUnaryData<any>) => void>(handler: T) =>
      ((call, cb) => {
        try {
          checkToken(call.metadata, token);
        } catch (error) {
          return cb(errorToStatus(error));
        }
        handler(call, cb);
      }) as T;
    return {
      streamBatches: this.streamBatches,
      ackBatch: guard(this.ackBatch),
      reportLogprobs: guard(this.reportLogprobs),
      computeAdvantages: guard(this.computeAdvantages),
      status: guard(this.status),
    };
  }
}

/** The RolloutBatch of an advantage request: a served batch's layout, or the request's own. */
function advantageBatch(req: AdvantageRequest, served: StoredBatch | null): RolloutBatch {
  if (served) {
    return {
      offsets: int32s(served.offsets),
      lossMask: uint8s(served.lossMask),
      rewards: Float64Array.from(served.rowInfo, (r) => r.reward),
      groupIds: indexStrings(served.rowInfo.map((r) => r.groupKey)),
      taskIds: indexStrings(served.rowInfo.map((r) => r.task)),
      harnessIds: indexStrings(served.rowInfo.map((r) => r.harness)),
    };
  }
  const offsets = int32s(req.offsets, "offsets");
  const lossMask = uint8s(req.lossMask);
  const rows = offsets.length - 1;
  const problem = rows < 0 ? "offsets must have rows + 1 entries" : checkOffsets(offsets, rows, lossMask.length);
  if (problem) throw new LinkError("RLGATE_BAD_REQUEST", problem);
  const perRow = (name: string, values: number[]) => {
    if (values.length === 0) return undefined;
    if (values.length !== rows) throw new LinkError("RLGATE_BAD_REQUEST", `${name} has ${values.length} entries for ${rows} rows`);
    return Int32Array.from(values);
  };
  if (req.rewards.length !== rows) throw new LinkError("RLGATE_BAD_REQUEST", `rewards has ${req.rewards.length} entries for ${rows} rows`);
  return {
    offsets,
    lossMask,
    rewards: Float64Array.from(req.rewards),
    groupIds: perRow("group_ids", req.groupIds),
    taskIds: perRow("task_ids", req.taskIds),
    harnessIds: perRow("harness_ids", req.harnessIds),
  };
}
