// The trajectory worker's thread: rebuilds finished rollouts' trajectories from the store, so that a long rollout's
// reconstruction (tens of milliseconds for a 100-turn session) never holds up the calls the gateway relays.
// It opens the gateway's store itself (lmdb-js shares one environment between a process's threads) and only reads.
// Started and spoken to by trajectory-thread.ts.
import { LRUCache } from "lru-cache";
import { parentPort, workerData } from "node:worker_threads";
import { boundedStringify } from "../util/bounded-json.ts";
import type { RolloutRecord } from "../store/records.ts";
import { Store } from "../store/store.ts";
import { reconstructionToJson } from "../trajectory/index.ts";
import { encodeStreamMessage } from "../protocol/proto.ts";
import type { Reconstruction } from "../trajectory/types.ts";
import { rolloutMessage } from "./grpc/rollout-message.ts";
import { reconstructStored, type TrajectorySettings } from "./trajectories.ts";
import { toSnakeCase } from "../util/json-case.ts";

export interface TrajectoryWorkerData {
  storePath: string;
  settings: TrajectorySettings;
  /** The map size the process's store is opened with (Store's `mapSize`). */
  mapSize: number;
}

export type TrajectoryRequest = { id: number } & (
  | { kind: "ping" }
  | { kind: "summary" | "json"; rollout: RolloutRecord }
  | { kind: "message"; rollout: RolloutRecord; cursor: number; maxMessageBytes: number }
  | { kind: "calls"; rolloutId: string | null }
);

/**
 * The last finished rollouts' reconstructions (up to `capacity` of them and `maxTokens` tokens of trajectories):
 * finishing a rollout (its summary) is usually followed by its delivery to an RL core, which then needs no second
 * reconstruction. An entry is used only while the rollout's record and call count are what they were.
 */
class RecentReconstructions {
  readonly #entries: LRUCache<string, { key: string; reconstruction: Reconstruction; tokens: number }>;

  constructor(capacity: number, maxTokens: number) {
    // An entry larger than maxTokens is not kept.
    this.#entries = new LRUCache({
      max: capacity,
      maxSize: maxTokens,
      sizeCalculation: (entry) => Math.max(1, entry.tokens),
    });
  }

  get(store: Store, rollout: RolloutRecord, settings: TrajectorySettings): Reconstruction {
    if (rollout.finishedAt === null) return reconstructStored(store, rollout, settings);
    const key = `${rollout.finishedAt}|${rollout.status}|${rollout.reward}|${store.countCalls(rollout.id)}`;
    const hit = this.#entries.get(rollout.id);
    if (hit?.key === key) return hit.reconstruction;
    const reconstruction = reconstructStored(store, rollout, settings);
    const tokens = reconstruction.trajectories.reduce((sum, t) => sum + t.tokenIds.length, 0);
    this.#entries.set(rollout.id, { key, reconstruction, tokens });
    return reconstruction;
  }
}

/**
 * The control API's JSON (snake_case, util/json-case.ts), made here: a long rollout's is megabytes, and its bytes
 * cross to the main thread without a copy.
 */
function jsonBytes(value: unknown): Uint8Array {
  return new TextEncoder().encode(boundedStringify(toSnakeCase(value))); // a stored body too deep to write never breaks a read
}

export type TrajectoryReply = { id: number } & ({ ok: true; value: unknown } | { ok: false; error: string });

/** Bytes whose memory can be handed over to the main thread: their own buffer (small Buffers share a pool). */
function ownBytes(bytes: Uint8Array): Uint8Array {
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : new Uint8Array(bytes);
}

if (parentPort) {
  const port = parentPort;
  const { storePath, settings, mapSize } = workerData as TrajectoryWorkerData;
  const store = new Store({ path: storePath, mapSize });
  const recent = new RecentReconstructions(8, 4_000_000); // ~4M tokens: tens of MB at most
  const reply = (id: number, value: unknown, transfer: ArrayBuffer[] = []) =>
    port.postMessage({ id, ok: true, value } satisfies TrajectoryReply, transfer);
  /** Bytes with their own buffer, handed over without a copy. */
  const replyBytes = (id: number, bytes: Uint8Array) => reply(id, bytes, [bytes.buffer as ArrayBuffer]);
  port.on("message", (request: TrajectoryRequest) => {
    try {
      if (request.kind === "ping") return reply(request.id, null);
      store.refreshReads(); // what the main thread committed before asking must be seen
      if (request.kind === "calls") {
        return replyBytes(request.id, jsonBytes({ calls: store.listCalls(request.rolloutId) }));
      }
      const reconstruction = recent.get(store, request.rollout, settings);
      if (request.kind === "message") {
        // Serialized here too: the main thread hands the bytes to gRPC as they are.
        const message = rolloutMessage(reconstruction, request.cursor, request.rollout, request.maxMessageBytes);
        return replyBytes(request.id, ownBytes(encodeStreamMessage({ rollout: message })));
      }
      if (request.kind === "summary")
        return reply(request.id, { stats: reconstruction.stats, flags: reconstruction.flags });
      return replyBytes(request.id, jsonBytes(reconstructionToJson(reconstruction)));
    } catch (error) {
      port.postMessage({
        id: request.id,
        ok: false,
        error: error instanceof Error ? error.message : String(error),
      } satisfies TrajectoryReply);
    }
  });
}
