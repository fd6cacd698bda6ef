// Pausing and resuming every upstream replica through its server's own endpoints:
//   vLLM (served with VLLM_SERVER_DEV_MODE=1): `POST /pause?mode=abort|wait|keep`, `POST /resume`. vLLM is not told
//   a version name: the gateway keeps it.
//   SGLang: `POST /pause_generation {"mode": "abort"|"in_place"}`, `POST /update_weight_version {"new_version"}`,
//   `POST /continue_generation`. SGLang has no mode that waits for in-flight requests: for `wait` the gateway holds
//   new calls, waits until the replica has none of its calls in flight, then pauses it in place.
import type { FlavorName } from "../upstream/flavor.ts";
import type { Replica } from "../upstream/replica.ts";
import type { PauseMode, UpstreamPauser } from "./gate.ts";

/** How often a wait-mode pause of an SGLang replica looks whether its in-flight calls ended. */
const DRAIN_POLL_MS = 20;

export class ReplicaPauser implements UpstreamPauser {
  readonly #flavor: FlavorName;
  readonly #replicas: () => readonly Replica[];
  readonly #apiKey: string | undefined;

  constructor(flavor: FlavorName, replicas: () => readonly Replica[], apiKey?: string) {
    this.#flavor = flavor;
    this.#replicas = replicas;
    this.#apiKey = apiKey;
  }

  async pause(mode: PauseMode): Promise<void> {
    await this.#each(async (replica) => {
      if (this.#flavor === "vllm") return this.#post(replica, `/pause?mode=${mode}`);
      if (mode === "wait") await drained(replica);
      return this.#post(replica, "/pause_generation", { mode: mode === "abort" ? "abort" : "in_place" });
    });
  }

  async resume(version: string | null): Promise<void> {
    await this.#each(async (replica) => {
      if (this.#flavor === "vllm") return this.#post(replica, "/resume");
      if (version !== null)
        await this.#post(replica, "/update_weight_version", { new_version: version, abort_all_requests: false });
      return this.#post(replica, "/continue_generation");
    });
  }

  /** Every replica at once; the first failure names its replica. */
  async #each(work: (replica: Replica) => Promise<void>): Promise<void> {
    const results = await Promise.allSettled(this.#replicas().map(work));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
  }

  async #post(replica: Replica, path: string, body?: unknown): Promise<void> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.#apiKey) headers["authorization"] = `Bearer ${this.#apiKey}`;
    const response = await replica.pool.request({
      method: "POST",
      path: replica.basePath + path,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.body.text();
    if (response.statusCode < 200 || response.statusCode >= 300)
      throw new Error(`${replica.url}${path} answered HTTP ${response.statusCode}: ${text.slice(0, 300)}`);
  }
}

async function drained(replica: Replica): Promise<void> {
  while (replica.inFlight > 0) await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
}
