// The upstream connection pool: keep-alive undici Pool to one inference server.
import { Pool } from "undici";

export interface UpstreamOptions {
  url: string;
  /** Bearer token for the upstream (rollout keys never travel upstream). */
  apiKey?: string;
  connections?: number;
  /** Milliseconds to wait for response headers / between body chunks. */
  headersTimeoutMs?: number;
  bodyTimeoutMs?: number;
}

export class Upstream {
  readonly url: URL;
  readonly origin: string;
  /** Path prefix of the upstream URL (e.g. "" or "/sglang"), prepended to forwarded paths. */
  readonly basePath: string;
  readonly apiKey: string | undefined;
  readonly pool: Pool;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;

  constructor(options: UpstreamOptions) {
    this.url = new URL(options.url);
    this.origin = this.url.origin;
    this.basePath = this.url.pathname.replace(/\/+$/, "").replace(/\/v1$/, "");
    this.apiKey = options.apiKey;
    this.headersTimeoutMs = options.headersTimeoutMs ?? 600_000;
    this.bodyTimeoutMs = options.bodyTimeoutMs ?? 600_000;
    this.pool = new Pool(this.origin, {
      connections: options.connections ?? 256,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      headersTimeout: this.headersTimeoutMs,
      bodyTimeout: this.bodyTimeoutMs,
    });
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}
