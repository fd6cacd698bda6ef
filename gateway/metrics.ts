// Prometheus metrics for one gateway instance (its own registry, so several gateways can live in one process).
import { Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";
import type { CallRecord } from "../store/records.ts";
import { CallCounter, CallHistogram } from "./call-metrics.ts";

/** What /metrics shows of one upstream replica (gateway/upstream/replica.ts). */
export interface ReplicaFigures {
  readonly url: string;
  readonly inFlight: number;
  readonly requests: number;
  readonly errors: number;
  readonly healthy: boolean;
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1];

export class GatewayMetrics {
  readonly registry = new Registry();
  // Counted on every call: the cheap kinds (call-metrics.ts). The others change rarely and stay prom-client's.
  readonly requests = new CallCounter(this.registry, {
    name: "rlgate_requests_total",
    help: "Captured harness calls by API surface and call status",
    labelNames: ["api", "status"],
  });
  readonly upstreamLatency = new CallHistogram(this.registry, {
    name: "rlgate_upstream_latency_seconds",
    help: "Time from sending a call upstream to the end of its response",
    labelNames: ["api"],
    buckets: LATENCY_BUCKETS,
  });
  readonly timeToFirstToken = new CallHistogram(this.registry, {
    name: "rlgate_time_to_first_token_seconds",
    help: "Time from receiving a streamed call to its first sampled token",
    labelNames: ["api"],
    buckets: LATENCY_BUCKETS,
  });
  readonly overhead = new CallHistogram(this.registry, {
    name: "rlgate_overhead_seconds",
    help: "Time spent in rlgate itself per call (parsing, rewriting, capture, commit), excluding the upstream",
    labelNames: ["api"],
    buckets: OVERHEAD_BUCKETS,
  });
  readonly tokens = new CallCounter(this.registry, {
    name: "rlgate_tokens_captured_total",
    help: "Token ids captured, by kind (prompt or sampled)",
    labelNames: ["kind"],
  });
  readonly errors = new CallCounter(this.registry, {
    name: "rlgate_errors_total",
    help: "Errors by code (gateway errors, upstream errors, client aborts, missing token ids)",
    labelNames: ["code"],
  });
  readonly promptModes = new Counter({
    name: "rlgate_prompt_mode_calls_total",
    help: "Chat-shaped calls of a gateway in tokens prompt mode, by the mode they were served in and why (continued thread, new thread and its reason, or the reason of a fallback to messages)",
    labelNames: ["mode", "reason"] as const,
    registers: [this.registry],
  });
  readonly routedExpertCalls = new Counter({
    name: "rlgate_routed_experts_calls_total",
    help: "Calls of serve --routed-experts by whether their routed experts were kept (kept) or not (issue: absent or malformed; the rollout is flagged)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly routedExpertRows = new Counter({
    name: "rlgate_routed_experts_rows_total",
    help: "Token positions whose routed experts the upstream sent (before the store keeps only those the rollout lacked)",
    registers: [this.registry],
  });
  readonly routedExpertsReemitted = new Counter({
    name: "rlgate_routed_experts_reemitted_total",
    help: "Streamed harness calls served from a non-streamed upstream call re-emitted as a stream, because the upstream (vLLM) sends routed experts only on whole responses",
    registers: [this.registry],
  });
  readonly rolloutsTimedOut = new Counter({
    name: "rlgate_rollouts_timed_out_total",
    help: "Rollouts still open at their deadline (deadline_s, or serve --rollout-timeout) that the gateway finished as timeout, without a reward",
    registers: [this.registry],
  });
  readonly passthrough = new Counter({
    name: "rlgate_passthrough_requests_total",
    help: "Requests forwarded unchanged to the upstream (routes rlgate does not capture)",
    registers: [this.registry],
  });

  // The replicas' figures are plain numbers kept by the upstream and read at scrape time: nothing on the call path.
  #replicas: () => readonly ReplicaFigures[] = () => [];
  readonly replicaInFlight: Gauge<"replica"> = new Gauge({
    name: "rlgate_replica_in_flight",
    help: "Requests in flight to each upstream replica",
    labelNames: ["replica"] as const,
    registers: [this.registry],
    collect: (): void => this.#collectReplicas(this.replicaInFlight, (r) => r.inFlight),
  });
  readonly replicaHealthy: Gauge<"replica"> = new Gauge({
    name: "rlgate_replica_healthy",
    help: "1 while an upstream replica takes calls, 0 while it is ejected (failing requests or health checks)",
    labelNames: ["replica"] as const,
    registers: [this.registry],
    collect: (): void => this.#collectReplicas(this.replicaHealthy, (r) => (r.healthy ? 1 : 0)),
  });
  readonly replicaRequests: Counter<"replica"> = new Counter({
    name: "rlgate_replica_requests_total",
    help: "Requests sent to each upstream replica (calls, passthrough, and a call's attempt on a replica that refused it)",
    labelNames: ["replica"] as const,
    registers: [this.registry],
    collect: (): void => this.#collectReplicas(this.replicaRequests, (r) => r.requests),
  });
  readonly replicaErrors: Counter<"replica"> = new Counter({
    name: "rlgate_replica_errors_total",
    help: "Requests an upstream replica failed: refused connections, 5xx answers, broken bodies, timeouts",
    labelNames: ["replica"] as const,
    registers: [this.registry],
    collect: (): void => this.#collectReplicas(this.replicaErrors, (r) => r.errors),
  });

  /** Where the replica figures come from (the gateway's upstream). */
  observeReplicas(source: () => readonly ReplicaFigures[]): void {
    this.#replicas = source;
  }

  #collectReplicas(metric: Gauge<"replica"> | Counter<"replica">, value: (r: ReplicaFigures) => number): void {
    // Reset first: a replica removed from the list leaves /metrics.
    metric.reset();
    for (const replica of this.#replicas()) {
      if (metric instanceof Gauge) metric.set({ replica: replica.url }, value(replica));
      else metric.inc({ replica: replica.url }, value(replica));
    }
  }

  constructor(options: { processMetrics?: boolean } = {}) {
    // Under their standard names (process_cpu_seconds_total, nodejs_heap_size_used_bytes…): the dashboards and
    // alerts written for any Node service read them as they are.
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  recordCall(call: CallRecord): void {
    this.requests.inc({ api: call.api, status: call.status });
    const t = call.timings;
    if (t.upstreamStart !== null) this.upstreamLatency.observe({ api: call.api }, (t.end - t.upstreamStart) / 1000);
    if (call.stream && t.firstToken !== null)
      this.timeToFirstToken.observe({ api: call.api }, (t.firstToken - t.start) / 1000);
    this.overhead.observe({ api: call.api }, t.overheadMs / 1000);
    if (call.promptTokenIds) this.tokens.inc({ kind: "prompt" }, call.promptTokenIds.length);
    let sampled = 0;
    for (const choice of call.choices) sampled += choice.tokenIds.length;
    if (sampled) this.tokens.inc({ kind: "sampled" }, sampled);
    if (call.status !== "ok") this.errors.inc({ code: call.status });
    if (call.status === "ok" && call.tokenSource !== "upstream")
      this.errors.inc({ code: `tokens_${call.tokenSource}` });
    let routed = 0;
    for (const choice of call.choices) routed += choice.routing?.rows ?? 0;
    if (call.routingIssue !== undefined) this.routedExpertCalls.inc({ outcome: "issue" });
    else if (routed > 0) this.routedExpertCalls.inc({ outcome: "kept" });
    if (routed > 0) this.routedExpertRows.inc(routed);
  }
}
