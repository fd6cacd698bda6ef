// Channel and server options shared by both ends of the link, and the bearer-token check.
import type { ChannelOptions, Metadata } from "@grpc/grpc-js";
import { bearerMatches } from "../util/secrets.ts";
import { LinkError } from "./errors.ts";

/** Default limit on one message either way (a rollout's trajectories, a batch). */
export const DEFAULT_MAX_MESSAGE_BYTES = 512 * 1024 * 1024;

export function channelOptions(maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES): ChannelOptions {
  return {
    "grpc.max_receive_message_length": maxMessageBytes,
    "grpc.max_send_message_length": maxMessageBytes,
    // Dead peers (a killed process, a frozen one) are noticed within ~40 s even on an idle stream.
    "grpc.keepalive_time_ms": 30_000,
    "grpc.keepalive_timeout_ms": 10_000,
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.http2.min_ping_interval_without_data_ms": 10_000,
    "grpc.max_reconnect_backoff_ms": 2_000,
    "grpc.initial_reconnect_backoff_ms": 100,
  };
}

export function serverOptions(maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES): ChannelOptions {
  return { ...channelOptions(maxMessageBytes), "grpc.http2.min_ping_interval_without_data_ms": 5_000 };
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);
export const isLoopbackHost = (host: string): boolean => LOOPBACK.has(host);

/** Throws unless the call carries `authorization: Bearer <token>` (no token configured: every call passes). */
export function checkToken(metadata: Metadata, token: string | null | undefined): void {
  if (!token) return;
  if (!bearerMatches(metadata.get("authorization")[0], token)) {
    throw new LinkError(
      "RLGATE_UNAUTHORIZED",
      "this gRPC service needs 'authorization: Bearer <token>' metadata (--token)",
    );
  }
}

/** Grpc address ("host:port") from a user's "host:port", "grpc://host:port" or bare ":port". */
export function grpcTarget(address: string): string {
  const a = address
    .trim()
    .replace(/^grpc:\/\//, "")
    .replace(/\/+$/, "");
  return a.startsWith(":") ? `127.0.0.1${a}` : a;
}

export function bearer(token: string | null | undefined): Record<string, string> {
  return token ? { authorization: `Bearer ${token}` } : {};
}
