// Requests to the inference server a replay runs against: plain JSON POSTs with a deadline and errors that say which
// server, which route and what it answered.

export class UpstreamError extends Error {
  readonly code = "RLGATE_REPLAY_UPSTREAM";
  readonly status: number | null;
  constructor(message: string, status: number | null, options?: ErrorOptions) {
    super(message, options);
    this.status = status;
  }
}

export interface UpstreamOptions {
  url: string;
  apiKey?: string;
  timeoutMs?: number;
}

export class ReplayUpstream {
  readonly url: string;
  readonly #headers: Record<string, string>;
  readonly #timeoutMs: number;

  constructor(options: UpstreamOptions) {
    this.url = options.url.replace(/\/+$/, "").replace(/\/v1$/, "");
    this.#headers = {
      "content-type": "application/json",
      ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
    };
    this.#timeoutMs = options.timeoutMs ?? 600_000;
  }

  /** POSTs `body` to `path` (e.g. /v1/completions) and returns the JSON answer; non-2xx answers throw. */
  async post(path: string, body: unknown): Promise<Record<string, any>> {
    let res: Response;
    try {
      res = await fetch(`${this.url}${path}`, {
        method: "POST",
        headers: this.#headers,
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (error) {
      const cause = (error as Error & { cause?: Error }).cause?.message ?? (error as Error).message;
      throw new UpstreamError(`cannot reach the upstream at ${this.url} (${cause})`, null, { cause: error });
    }
    const text = await res.text();
    let json: Record<string, any> | undefined;
    try {
      json = JSON.parse(text) as Record<string, any>;
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const message = json?.["error"]?.["message"] ?? json?.["message"] ?? json?.["detail"] ?? text.slice(0, 300);
      throw new UpstreamError(
        `${this.url}${path} answered ${res.status}: ${typeof message === "string" ? message : JSON.stringify(message)}`,
        res.status,
      );
    }
    if (!json)
      throw new UpstreamError(
        `${this.url}${path} answered ${res.status} without JSON: ${text.slice(0, 300)}`,
        res.status,
      );
    return json;
  }
}

/** Runs `work` over `items` with at most `limit` in flight, in order of items; `onDone` after each. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T, index: number) => Promise<R>,
  onDone?: () => void,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i]!, i);
      onDone?.();
    }
  });
  await Promise.all(lanes);
  return out;
}
