// Prometheus metrics of one RL core (its own registry), served on the core's /metrics.
import { Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";
import type { Consistency } from "../../protocol/index.ts";

export class CoreMetrics {
  readonly registry = new Registry();
  readonly rollouts = new Counter({
    name: "rlgate_core_rollouts_total",
    help: "Rollouts received from gateways, by rollout status",
    labelNames: ["status"] as const,
    registers: [this.registry],
  });
  readonly duplicates = new Counter({
    name: "rlgate_core_rollouts_duplicate_total",
    help: "Rollouts delivered again (at least once) and skipped",
    registers: [this.registry],
  });
  readonly dropped = new Counter({
    name: "rlgate_core_rollouts_dropped_total",
    help: "Rollouts left out of advantages and loss, by reason (infra_error, flagged, oversize, no_reward, zero_variance, stale, rejected, error)",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly late = new Counter({
    name: "rlgate_core_rollouts_late_total",
    help: "Rollouts that came after their group generation was processed short of its size (trained as its late ones)",
    registers: [this.registry],
  });
  readonly staleTokens = new Counter({
    name: "rlgate_core_stale_tokens_total",
    help: "Trained tokens sampled by a policy older than current - max_staleness, by what was done: kept (trained) or masked (out of the loss); rollouts dropped for it count in rollouts_dropped{reason=stale}",
    labelNames: ["action"] as const,
    registers: [this.registry],
  });
  readonly versionLowered = new Counter({
    name: "rlgate_core_policy_version_lowered_total",
    help: "Trainer resumes that named a policy version lower than the current one (a restart from an older checkpoint, a new run): it became current",
    registers: [this.registry],
  });
  readonly groups = new Counter({
    name: "rlgate_core_groups_total",
    help: "Groups processed, by what completed them (size or timeout)",
    labelNames: ["completed_by"] as const,
    registers: [this.registry],
  });
  readonly batches = new Counter({
    name: "rlgate_core_batches_total",
    help: "Batches built",
    registers: [this.registry],
  });
  readonly batchesAcked = new Counter({
    name: "rlgate_core_batches_acked_total",
    help: "Batches acked by trainers",
    registers: [this.registry],
  });
  readonly tokensServed = new Counter({
    name: "rlgate_core_tokens_served_total",
    help: "Tokens of batches sent to trainers (re-deliveries included)",
    registers: [this.registry],
  });
  readonly pearson = new Gauge({
    name: "rlgate_core_logprob_pearson",
    help: "Pearson r of trainer vs inference logprobs over trained tokens, latest report",
    labelNames: ["harness"] as const,
    registers: [this.registry],
  });
  readonly k3 = new Gauge({
    name: "rlgate_core_logprob_k3_kl",
    help: "Mean k3 estimate of KL(inference || trainer), latest report",
    labelNames: ["harness"] as const,
    registers: [this.registry],
  });
  readonly absDiff = new Gauge({
    name: "rlgate_core_logprob_abs_diff",
    help: "Quantiles of |trainer - inference logprob| over trained tokens, latest report",
    labelNames: ["harness", "quantile"] as const,
    registers: [this.registry],
  });
  readonly compared = new Counter({
    name: "rlgate_core_logprob_tokens_total",
    help: "Tokens whose trainer logprobs were compared",
    labelNames: ["harness"] as const,
    registers: [this.registry],
  });

  constructor(
    gauges: {
      groupsPending(): number;
      readyRows(): number;
      batchesReady(): number;
      gateways(): Array<[string, boolean]>;
    },
    processMetrics = false,
  ) {
    const live = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(read());
        },
      });
    live("rlgate_core_groups_pending", "Groups waiting to complete", gauges.groupsPending);
    live("rlgate_core_trajectories_ready", "Trajectories with advantages waiting for a batch", gauges.readyRows);
    live("rlgate_core_batches_ready", "Batches not yet acked by a trainer", gauges.batchesReady);
    new Gauge({
      name: "rlgate_core_gateway_connected",
      help: "1 while the core's trajectory stream from a gateway is subscribed",
      labelNames: ["gateway"] as const,
      registers: [this.registry],
      collect() {
        for (const [gateway, up] of gauges.gateways()) this.set({ gateway }, up ? 1 : 0);
      },
    });
    if (processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  observeConsistency(figures: readonly Consistency[]): void {
    for (const f of figures) {
      if (f.tokens === 0) continue;
      const harness = f.harness;
      if (Number.isFinite(f.pearson)) this.pearson.set({ harness }, f.pearson);
      this.k3.set({ harness }, f.k3Kl);
      this.absDiff.set({ harness, quantile: "0.5" }, f.absDiffP50);
      this.absDiff.set({ harness, quantile: "0.99" }, f.absDiffP99);
      this.compared.inc({ harness }, f.tokens);
    }
  }
}
