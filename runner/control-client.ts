// The gateway's control API as `rlgate run` uses it: over HTTP like any user (the runner never imports gateway/).
export class ControlError extends Error {
  readonly code = "RLGATE_RUN_GATEWAY";
}

export interface CreatedRollout {
  id: string;
  key: string;
}

export interface FinishedRollout {
  calls: number;
  /** Trajectories sent to training (null when the gateway could not summarize them). */
  trajectories: number | null;
}

export class ControlClient {
  readonly url: string;
  readonly #headers: Record<string, string>;

  constructor(url: string, token?: string) {
    this.url = url.replace(/\/+$/, "");
    this.#headers = { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) };
  }

  async #call(method: string, path: string, body?: unknown): Promise<any> {
    const send = () =>
      fetch(`${this.url}${path}`, {
        method,
        headers: this.#headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    let res: Response;
    try {
      res = await send();
    } catch (cause) {
      // A kept-alive socket the gateway closed as this request went out resets it: a GET is safe to send again, once.
      try {
        if (method !== "GET") throw cause;
        res = await send();
      } catch {
        throw new ControlError(`gateway ${this.url} unreachable: ${(cause as Error).message}`, { cause });
      }
    }
    const text = await res.text();
    if (!res.ok) {
      let message = text;
      try {
        message = JSON.parse(text).error?.message ?? text;
      } catch {
        /* not JSON */
      }
      throw new ControlError(`${method} ${path}: ${res.status} ${message}`);
    }
    return JSON.parse(text);
  }

  createRollout(body: {
    group: string;
    task: string;
    harness: string;
    /** The training round (a positive integer): with the group it names the RL group. */
    round?: number;
    metadata: Record<string, unknown>;
    /** A branch of a finished rollout (`rlgate run --branch`). */
    branch?: { of: string; at_call: number; at_token?: number; on_divergence: string; seed?: number };
  }): Promise<CreatedRollout> {
    return this.#call("POST", "/api/rollouts", body);
  }

  async finishRollout(
    id: string,
    body: { reward: number | null; status: string; metadata: Record<string, unknown> },
  ): Promise<FinishedRollout> {
    const r = await this.#call("POST", `/api/rollouts/${encodeURIComponent(id)}/finish`, body);
    return { calls: r.calls ?? 0, trajectories: r.trajectories?.stats?.retained_trajectories ?? null };
  }

  /** A rollout as the control API shows it (snake_case). */
  rollout(id: string): Promise<any> {
    return this.#call("GET", `/api/rollouts/${encodeURIComponent(id)}`);
  }

  /** A rollout's call records as the control API shows them (snake_case). */
  async calls(id: string): Promise<unknown[]> {
    return (await this.#call("GET", `/api/rollouts/${encodeURIComponent(id)}/calls`)).calls;
  }

  /** Fails with the gateway's reason when the control API is out of reach (unreachable, or a token missing or wrong). */
  async check(): Promise<void> {
    await this.#call("GET", "/api/rollouts?limit=1");
  }

  /** The model the upstream serves (the first of GET /v1/models), which presets pass to the harness. */
  async servedModel(): Promise<string> {
    const r = await this.#call("GET", "/v1/models");
    const id = r?.data?.[0]?.id;
    if (typeof id !== "string") throw new ControlError(`GET /v1/models on ${this.url} names no model`);
    return id;
  }
}
