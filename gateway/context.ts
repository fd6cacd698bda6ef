// What every request handler of one gateway shares.
import type { Store } from "../store/store.ts";
import type { GatewayMetrics } from "./metrics.ts";
import type { Upstream } from "./upstream/client.ts";

export interface GatewayConfig {
  /** Largest accepted request body in bytes. */
  bodyLimitBytes: number;
  /** Refuse calls that no rollout claims. */
  requireRollout: boolean;
  /** Base URL handed to harnesses; by default taken from the Host header of the control-API request. */
  publicUrl: string | null;
  /** Bearer token for /api when set (required when listening beyond loopback). */
  controlToken: string | null;
}

export interface GatewayContext {
  store: Store;
  metrics: GatewayMetrics;
  upstream: Upstream;
  config: GatewayConfig;
  log: (line: string) => void;
}
