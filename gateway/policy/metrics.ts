// What /metrics shows of weight updates driven through the gateway (gateway/policy): pauses, held calls and the time
// they were held, continued answers. Registered on the gateway's own registry, so workers' figures add up as the rest.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

const HOLD_BUCKETS = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export class PolicyMetrics {
  readonly pauses: Counter<"mode">;
  readonly autoResumes: Counter;
  readonly held: Counter;
  readonly holding: Gauge;
  readonly holdSeconds: Histogram;
  readonly continued: Counter;
  readonly paused: Gauge;

  constructor(registry: Registry) {
    const registers = [registry];
    this.pauses = new Counter({
      name: "rlgate_policy_pauses_total",
      help: "Pauses of the upstream replicas for a weight update (POST /api/policy/pause), by mode",
      labelNames: ["mode"] as const,
      registers,
    });
    this.autoResumes = new Counter({
      name: "rlgate_policy_auto_resumes_total",
      help: "Pauses that ended at their timeout because nobody resumed them (the caller crashed or forgot)",
      registers,
    });
    this.paused = new Gauge({
      name: "rlgate_policy_paused",
      help: "1 while the upstreams are paused for a weight update",
      // Every worker of `serve --workers N` holds the same state: their figures are not added up.
      aggregator: "max",
      registers,
    });
    this.held = new Counter({
      name: "rlgate_policy_held_calls_total",
      help: "Harness calls that arrived during a pause and were held until the resume",
      registers,
    });
    this.holding = new Gauge({
      name: "rlgate_policy_holding_calls",
      help: "Harness calls held now by a pause",
      registers,
    });
    this.holdSeconds = new Histogram({
      name: "rlgate_policy_hold_seconds",
      help: "How long each held call (and each interrupted answer) waited for the resume",
      buckets: HOLD_BUCKETS,
      registers,
    });
    this.continued = new Counter({
      name: "rlgate_policy_continued_answers_total",
      help: "Answers the upstream aborted (abort-mode pause) that the gateway continued after the resume",
      registers,
    });
  }
}
