// The main thread's side of the trajectory worker (trajectory-worker.ts): finished rollouts' reconstructions for the
// control API and the trajectory stream are computed there, one request at a time, and come back as promises.
// The worker starts on first use and again after a crash (its pending requests fail with the reason).
import { Worker } from "node:worker_threads";
import { RlgateError } from "../util/errors.ts";
import type { RolloutRecord } from "../store/records.ts";
import { DEFAULT_MAP_SIZE } from "../store/store.ts";
import type { Reconstruction } from "../trajectory/types.ts";
import { EncodedStreamMessage } from "../protocol/proto.ts";
import type { TrajectoryReply, TrajectoryRequest, TrajectoryWorkerData } from "./trajectory-worker.ts";
import type { TrajectorySettings } from "./trajectories.ts";

/** The worker is not there to answer (it crashed, exited, or the gateway is closing): nothing is wrong with the rollout. */
export class TrajectoryWorkerUnavailable extends RlgateError<"RLGATE_UNAVAILABLE"> {
  override readonly name = "TrajectoryWorkerUnavailable";

  constructor(message: string) {
    super("RLGATE_UNAVAILABLE", message);
  }
}

type Pending = { worker: Worker; resolve: (value: unknown) => void; reject: (error: Error) => void };
type Request = TrajectoryRequest extends infer R ? (R extends unknown ? Omit<R, "id"> : never) : never;

// The worker is TypeScript: it registers tsx itself, as a worker does not inherit loaders that were registered
// in-process (`tsx --test`, `tsx file.ts`) rather than through --import.
const WORKER_URL = new URL("./trajectory-worker.ts", import.meta.url).href;
const TSX_API_URL = import.meta.resolve("tsx/esm/api");
const BOOTSTRAP = `
const { workerData } = require("node:worker_threads");
import(workerData.tsx).then(({ register }) => { register(); return import(workerData.url); });
`;

export class TrajectoryThread {
  readonly #data: TrajectoryWorkerData;
  #worker: Worker | null = null;
  readonly #pending = new Map<number, Pending>();
  #nextId = 0;
  #closed = false;

  /** `mapSize`: the map size this process's store was opened with (the worker opens it alike). */
  constructor(storePath: string, settings: TrajectorySettings, mapSize = DEFAULT_MAP_SIZE) {
    this.#data = { storePath, settings, mapSize };
  }

  /** Resolves once the worker has started and answers (it starts on first use otherwise). */
  async ready(): Promise<void> {
    await this.#request({ kind: "ping" });
  }

  /** Statistics and flags of a rollout's trajectories (what finishing a rollout reports). */
  summary(rollout: RolloutRecord): Promise<Pick<Reconstruction, "stats" | "flags">> {
    return this.#request({ kind: "summary", rollout }) as Promise<Pick<Reconstruction, "stats" | "flags">>;
  }

  /** The whole reconstruction as the control API shows it (`ReconstructionJson`), serialized. */
  json(rollout: RolloutRecord): Promise<Buffer> {
    return this.#bytes({ kind: "json", rollout });
  }

  /** A rollout's calls (null: the unattributed ones) as the control API lists them, serialized. */
  calls(rolloutId: string | null): Promise<Buffer> {
    return this.#bytes({ kind: "calls", rolloutId });
  }

  /** The rollout as the trajectory stream sends it (a StreamMessage), serialized. */
  async message(cursor: number, rollout: RolloutRecord, maxMessageBytes: number): Promise<EncodedStreamMessage> {
    return new EncodedStreamMessage(await this.#bytes({ kind: "message", rollout, cursor, maxMessageBytes }));
  }

  async close(): Promise<void> {
    this.#closed = true;
    const worker = this.#worker;
    this.#worker = null;
    if (worker) await worker.terminate();
  }

  /** A request whose answer is bytes (they cross threads as a Uint8Array: a Buffer again, on the same memory). */
  async #bytes(request: Request): Promise<Buffer> {
    const bytes = (await this.#request(request)) as Uint8Array;
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  #request(request: Request): Promise<unknown> {
    if (this.#closed) return Promise.reject(new TrajectoryWorkerUnavailable("the gateway is closing"));
    const id = ++this.#nextId;
    const worker = this.#start();
    worker.ref(); // the process waits for an answer that is on its way
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { worker, resolve, reject });
      worker.postMessage({ ...request, id });
    });
  }

  #start(): Worker {
    if (this.#worker) return this.#worker;
    const worker = new Worker(BOOTSTRAP, {
      eval: true,
      workerData: { ...this.#data, url: WORKER_URL, tsx: TSX_API_URL },
    });
    worker.on("message", (reply: TrajectoryReply) => {
      const pending = this.#pending.get(reply.id);
      if (!pending) return;
      this.#pending.delete(reply.id);
      this.#unrefIfIdle(worker);
      if (reply.ok) pending.resolve(reply.value);
      else pending.reject(new Error(reply.error));
    });
    const fail = (error: Error) => {
      if (this.#worker === worker) this.#worker = null;
      for (const [id, pending] of this.#pending) {
        if (pending.worker !== worker) continue;
        this.#pending.delete(id);
        pending.reject(error);
      }
    };
    worker.on("error", (error) => fail(new TrajectoryWorkerUnavailable(`trajectory worker failed: ${error.message}`)));
    worker.on("exit", (code) => fail(new TrajectoryWorkerUnavailable(`trajectory worker exited (${code})`)));
    this.#worker = worker;
    return worker;
  }

  /** An idle worker does not keep the process alive. */
  #unrefIfIdle(worker: Worker): void {
    for (const pending of this.#pending.values()) if (pending.worker === worker) return;
    worker.unref();
  }
}
