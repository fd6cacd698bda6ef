// What the primary of `rlgate serve --workers N` and its gateway workers tell each other over the cluster's IPC
// channel. Every type starts with "rlgate:" so that other listeners on the channel (prom-client's) ignore them.
import type { Registry } from "prom-client";
import type { RelayedUiEvent } from "../../ui/route.ts";
import type { PolicyState } from "../policy/gate.ts";

/** A weight-update state one worker reached (its pause or resume), for every other worker to hold calls alike. */
export interface PolicyMessage {
  type: "rlgate:policy";
  state: PolicyState;
}

/** One registry's figures as prom-client hands them between processes. */
export type MetricsJson = Awaited<ReturnType<Registry["getMetricsAsJSON"]>>;

/** A UI event in the shape the browser gets (ui/route.ts callEvent / rolloutEvent), before snake-casing. */
export interface UiEventMessage {
  type: "rlgate:ui-event";
  event: RelayedUiEvent;
  data: unknown;
}

export type WorkerMessage =
  /** The worker's gateway listens: its address, once. */
  | { type: "rlgate:ready"; url: string; port: number; upstreams: string[] }
  /** Whether a browser is connected to this worker's live UI (it wants the other workers' events). */
  | { type: "rlgate:ui-want"; want: boolean }
  | UiEventMessage
  | PolicyMessage
  /** A /metrics request landed on this worker: it asks for every worker's figures. */
  | { type: "rlgate:metrics-ask"; id: number }
  /** This worker's own figures, for the primary's request `id`. */
  | { type: "rlgate:metrics-part"; id: number; metrics: MetricsJson }
  /** The worker received connection `id` (the primary closes its copy). */
  | { type: "rlgate:took"; id: number }
  /** The worker, closing, closed its copy of connection `id` unread (the primary hands it to another). */
  | { type: "rlgate:declined"; id: number }
  /** The worker is closing: hand it no more connections. */
  | { type: "rlgate:closing" };

export type PrimaryMessage =
  /** Send your committed calls and rollouts to the primary (a browser is connected to some worker), or stop. */
  | { type: "rlgate:ui-relay"; on: boolean }
  | UiEventMessage
  /** Another worker's weight-update state (or the latest one, to a worker that just started). */
  | PolicyMessage
  /** Send your figures for request `id`. */
  | { type: "rlgate:metrics-collect"; id: number }
  /** The aggregated figures of all workers, in Prometheus text, for this worker's request `id`. */
  | { type: "rlgate:metrics-text"; id: number; text: string; contentType: string }
  /** A connection accepted on the shared port, sent with the message (connection-handoff.ts). */
  | { type: "rlgate:connection"; id: number }
  /** Close the gateway and exit (the primary is shutting down). */
  | { type: "rlgate:shutdown" };

export function isRlgateMessage<T extends { type: string }>(message: unknown): message is T {
  return (
    typeof message === "object" &&
    message !== null &&
    typeof (message as { type?: unknown }).type === "string" &&
    (message as { type: string }).type.startsWith("rlgate:")
  );
}
