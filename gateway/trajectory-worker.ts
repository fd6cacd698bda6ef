// The trajectory worker's thread: rebuilds finished rollouts' trajectories from the store, so that a long rollout's
// reconstruction (tens of milliseconds for a 100-turn session) never holds up the calls the gateway relays.
// It opens the gateway's store itself (lmdb-js shares one environment between a process's threads) and only reads.
// Started and spoken to by trajectory-thread.ts.
import { parentPort, workerData } from "node:worker_threads";
import type { RolloutRecord } from "../store/records.ts";
import { Store } from "../store/store.ts";
import { reconstructionToJson } from "../trajectory/index.ts";
import type { RolloutMessage } from "../rl-core/wire/messages.ts";
import { rolloutMessage } from "./grpc/rollout-message.ts";
import { reconstructStored, type TrajectorySettings } from "./trajectories.ts";

export interface TrajectoryWorkerData {
  storePath: string;
  settings: TrajectorySettings;
}

export type TrajectoryRequest = { id: number; rollout: RolloutRecord } & (
  | { kind: "summary" }
  | { kind: "json" }
  | { kind: "message"; cursor: number; maxMessageBytes: number }
);

export type TrajectoryReply = { id: number } & ({ ok: true; value: unknown } | { ok: false; error: string });

/** The message's token arrays, handed over to the main thread rather than copied (each owns its memory). */
function transferables(message: RolloutMessage): ArrayBuffer[] {
  const t = message.trajectories;
  const out = new Set<ArrayBuffer>();
  for (const bytes of [t.offsets, t.tokenIds, t.lossMask, t.logprobs, message.trained]) {
    const buffer = bytes.buffer as ArrayBuffer;
    if (bytes.byteLength > 0 && bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength) out.add(buffer);
  }
  return [...out];
}

if (parentPort) {
  const port = parentPort;
  const { storePath, settings } = workerData as TrajectoryWorkerData;
  const store = new Store({ path: storePath });
  port.on("message", (request: TrajectoryRequest) => {
    try {
      store.refreshReads(); // what the main thread committed before asking must be seen
      if (request.kind === "message") {
        const message = rolloutMessage(store, request.cursor, request.rollout, settings, request.maxMessageBytes);
        port.postMessage({ id: request.id, ok: true, value: message } satisfies TrajectoryReply, transferables(message));
        return;
      }
      const reconstruction = reconstructStored(store, request.rollout, settings);
      if (request.kind === "summary") {
        port.postMessage({ id: request.id, ok: true, value: { stats: reconstruction.stats, flags: reconstruction.flags } } satisfies TrajectoryReply);
        return;
      }
      // Serialized here: a long rollout's JSON is megabytes, and its bytes cross to the main thread without a copy.
      const json = new TextEncoder().encode(JSON.stringify(reconstructionToJson(reconstruction)));
      port.postMessage({ id: request.id, ok: true, value: json } satisfies TrajectoryReply, [json.buffer as ArrayBuffer]);
    } catch (error) {
      port.postMessage({ id: request.id, ok: false, error: error instanceof Error ? error.message : String(error) } satisfies TrajectoryReply);
    }
  });
}
