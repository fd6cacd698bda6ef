// `rlgate core`: the RL core. Reads finished rollouts from gateways' trajectory streams, groups them, computes
// advantages with the native kernels, packs batches by a token budget and serves them to trainers over gRPC.
import { Command, Option } from "commander";
import { resolve } from "node:path";
import { guardProcess } from "../util/crash-guard.ts";
import { backend, LOSS_AGG_MODES } from "../rl-core/kernels/index.ts";
import { OVERLONG_MODES, SINGLETON_MODES } from "../rl-core/core/estimator-settings.ts";
import {
  BATCH_LAYOUTS,
  BATCH_UNITS,
  CORE_ESTIMATORS,
  DEFAULT_CORE_PORT,
  DEFAULT_GROUP_TIMEOUT_MS,
  DEFAULT_TOKEN_BUDGET,
  STALE_MODES,
  startCore,
} from "../rl-core/core/index.ts";
import { TRAIN_SEGMENTS_HELP, trainSegmentsOption } from "./train-segments-option.ts";
import { createLogger, lineLogger } from "../util/log.ts";
import { DEFAULT_PYTHON } from "./default-python.ts";
import { formatDuration } from "./help-defaults.ts";
import { duration, integer, nonNegative, probability } from "./option-parsers.ts";

export function coreCommand(): Command {
  return new Command("core")
    .summary("the RL core: groups finished rollouts, computes advantages, serves batches to trainers")
    .description(
      "Run the RL core: read finished rollouts from gateways (at least once, resumable), group them, compute " +
        "token-level advantages, pack batches by a token budget and serve them to trainers (gRPC, proto/rlgate/v1/trainer.proto).",
    )
    .option(
      "--gateway <addr[,addr...]>",
      "the gateways' trajectory streams (each rlgate serve's --grpc-port, e.g. 127.0.0.1:8701); none: wait for `rlgate replay deliver --to-core`",
      (v: string) =>
        v
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean),
      [] as string[],
    )
    .option("--gateway-token <token>", "bearer token of the gateways (their --token)", process.env.RLGATE_TOKEN)
    .option(
      "--gateway-api <url[,url...]>",
      "the gateways' control APIs (each rlgate serve's http://HOST:PORT) that a trainer's PausePolicy / ResumePolicy is relayed to (docs/weight-updates.md)",
      (v: string) =>
        v
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean),
      [] as string[],
    )
    .option("--host <host>", "address of the trainer service (beyond loopback a --token is required)", "127.0.0.1")
    .option("--port <port>", "port of the trainer service", integer, DEFAULT_CORE_PORT)
    .option("--metrics-port <port>", "port of /metrics and /healthz (default: --port + 1)", integer)
    .option("--token <token>", "bearer token trainers must send", process.env.RLGATE_CORE_TOKEN)
    .option(
      "--data <dir>",
      "directory of the core's store (what it needs to resume)",
      process.env.RLGATE_CORE_DATA ?? ".rlgate/core",
    )
    .addOption(
      new Option("--estimator <name>", "advantage estimator (GAE: trainers call ComputeAdvantages with their values)")
        .choices([...CORE_ESTIMATORS])
        .default("grpo"),
    )
    .addOption(
      new Option("--normalize <by>", "whiten advantages per batch, or per task / harness / both within a batch")
        .choices(["none", "batch", "task", "harness", "task-harness"])
        .default("none"),
    )
    .addOption(
      new Option(
        "--whiten-scope <scope>",
        "where reinforce++ and reinforce++-baseline whiten: over the training batch (as OpenRLHF and verl) or within the group",
      )
        .choices(["batch", "group"])
        .default("batch"),
    )
    .option("--gamma <g>", "reinforce++: discount of the per-token return", probability, 1)
    .option(
      "--drop-zero-variance-groups",
      "drop groups whose rewards are all equal (no signal; DAPO's dynamic sampling), counted as zero_variance",
      false,
    )
    .addOption(
      new Option(
        "--singleton <rule>",
        "a group of one kept rollout (outcome estimators): zero = advantage 0 and no_signal (no baseline); raw = its reward as its advantage, as verl (GRPO: r / (1 + 1e-6))",
      )
        .choices([...SINGLETON_MODES])
        .default("zero"),
    )
    .addOption(
      new Option(
        "--overlong <rule>",
        "rollouts cut at the generation limit (a trajectory ending in finish_reason length), as DAPO: drop = out of advantage and loss (counted overlong); mask = in the group's statistics, out of the loss (counted overlong_masked); penalty = every rollout's reward gets DAPO's soft length penalty (--max-len, --overlong-buffer)",
      )
        .choices([...OVERLONG_MODES])
        .default("off"),
    )
    .option(
      "--overlong-buffer <tokens>",
      "--overlong penalty: DAPO's L_cache, the penalty falls from 0 at --max-len minus this many trained tokens to -1 at --max-len (and stays -1 beyond)",
      integer,
      0,
    )
    .option(
      "--kl-coef <beta>",
      "KL in the reward of served batches: a trainer reports ref logprobs (ReportLogprobs kind ref) and the reply carries the batch's advantages with -beta*KL(policy||ref) in the reward (outcome estimators need --batch-unit group)",
      nonNegative,
      0,
    )
    .addOption(
      new Option("--kl-estimator <k>", "the per-token KL estimator of --kl-coef (verl's kl_penalty): k1, k2 or k3")
        .choices(["k1", "k2", "k3"])
        .default("k1"),
    )
    .addOption(
      new Option(
        "--batch-unit <unit>",
        "what a batch never splits: a rollout's trajectories, or a whole group's (for group-level losses)",
      )
        .choices([...BATCH_UNITS])
        .default("rollout"),
    )
    .addOption(
      new Option(
        "--layout <layout>",
        "how batches lay out their tokens: rows (one per trajectory) or tree (each rollout's token trie, every distinct prefix once, for tree attention); a trainer's stream may ask for the other",
      )
        .choices([...BATCH_LAYOUTS])
        .default("rows"),
    )
    .option(
      "--max-len <tokens>",
      "a rollout's budget of trained tokens L: Dr.GRPO's constant for --loss-agg seq-mean-token-sum-norm (required by it) and DAPO's L_max for --overlong penalty (0: none)",
      integer,
      0,
    )
    .option(
      "--loss-tokens <n>",
      "global token count the loss weights are normalised by, the same for every batch (default: --token-budget; 0: per batch, weights sum to 1)",
      integer,
    )
    .addOption(
      new Option("--loss-agg <mode>", "loss aggregation the per-token loss weights implement")
        .choices([...LOSS_AGG_MODES])
        .default("token-mean"),
    )
    .option(
      "--token-budget <tokens>",
      "tokens per batch (rows are never split; a longer row is a batch alone)",
      integer,
      DEFAULT_TOKEN_BUDGET,
    )
    .option(
      "--batch-timeout <duration>",
      "build a partial batch once its oldest trajectory waited this long",
      duration,
      5000,
    )
    .option(
      "--group-size <n>",
      "rollouts per group when a rollout's metadata declares no group_size (0: wait for --group-timeout)",
      integer,
      0,
    )
    .option(
      "--group-timeout <duration>",
      "process a group that has not reached its size after this long, from its first rollout (default above the gateway's --rollout-timeout of 1h: every rollout has ended by then, so groups complete by size)",
      duration,
      DEFAULT_GROUP_TIMEOUT_MS,
    )
    .option(
      "--train-segments <kinds>",
      TRAIN_SEGMENTS_HELP.replace("default main", "default: what the gateway trains"),
      trainSegmentsOption,
    )
    .option(
      "--max-staleness <K>",
      "a trained token sampled by a policy version older than current - K is stale (current: the version a trainer's last ResumePolicy named, else the newest a rollout carried; a version counts by its number: 42, v42, step-42 — others are never judged); none judged without it",
      integer,
    )
    .addOption(
      new Option(
        "--stale <what>",
        "what --max-staleness does with stale tokens: keep = trained, counted, their versions in the batch for importance weights (never starves slow rollouts); mask = out of the loss, the rollout's fresh tokens still trained; drop = the whole rollout dropped (counted stale; starves rollouts slower than K updates)",
      )
        .choices([...STALE_MODES])
        .default("keep"),
    )
    .option("--train-flagged", "train on rollouts the reconstruction flagged (missing token ids or logprobs)", false)
    .option(
      "--follow-decisions <path>",
      "replay: form the groups and cut the batches another core recorded (its --data directory, read-only while it runs), " +
        "instead of deciding by timeouts, so a replay of its rollouts (rlgate replay deliver) serves bit-equal batches",
    )
    .option("--consumer-group <name>", "consumer group shared by cores that split one stream", "rl-core")
    .option(
      "--member <name>",
      "this core's name in the consumer group, unique among its cores (default: host and an id kept in --data, so a restarted core is the same member)",
    )
    .option(
      "--max-in-flight <n>",
      "unacked rollouts held per gateway (at least groups in flight x group size)",
      integer,
      1024,
    )
    .option(
      "--tls-cert <file>",
      "PEM certificate of the trainer service (TLS; required beyond loopback unless --insecure)",
      process.env.RLGATE_CORE_TLS_CERT,
    )
    .option("--tls-key <file>", "PEM private key of --tls-cert", process.env.RLGATE_CORE_TLS_KEY)
    .option(
      "--tls-client-ca <file>",
      "require trainers' client certificates signed by this PEM CA (mutual TLS)",
      process.env.RLGATE_CORE_TLS_CLIENT_CA,
    )
    .option("--insecure", "serve trainers in plaintext even beyond loopback (tokens and batches unencrypted)", false)
    .option(
      "--gateway-tls-ca <file>",
      "PEM CA the gateways' certificates are checked against (TLS; default beyond loopback: system roots)",
    )
    .option("--gateway-tls-cert <file>", "PEM client certificate for gateways that require one (mutual TLS)")
    .option("--gateway-tls-key <file>", "PEM private key of --gateway-tls-cert")
    .option(
      "--gateway-tls-server-name <name>",
      "name the gateways' certificates are checked for, when not the host dialed",
    )
    .option("--gateway-insecure", "dial the gateways in plaintext even beyond loopback", false)
    .action(async (opts, command: Command) => {
      if (opts.maxStaleness === undefined && command.getOptionValueSource("stale") === "cli")
        command.error(`error: --stale ${opts.stale} judges nothing without --max-staleness K`);
      const core = await startCore({
        gateways: opts.gateway,
        gatewayToken: opts.gatewayToken,
        gatewayApis: opts.gatewayApi,
        gatewayTls: {
          ca: opts.gatewayTlsCa,
          cert: opts.gatewayTlsCert,
          key: opts.gatewayTlsKey,
          serverName: opts.gatewayTlsServerName,
          insecure: opts.gatewayInsecure,
        },
        tls: { cert: opts.tlsCert, key: opts.tlsKey, ca: opts.tlsClientCa, insecure: opts.insecure },
        consumerGroup: opts.consumerGroup,
        member: opts.member,
        maxInFlight: opts.maxInFlight,
        host: opts.host,
        port: opts.port,
        metricsPort: opts.metricsPort,
        token: opts.token,
        dataDir: resolve(opts.data),
        estimator: opts.estimator,
        normalize: opts.normalize,
        lossAgg: opts.lossAgg,
        tokenBudget: opts.tokenBudget,
        batchTimeoutMs: opts.batchTimeout,
        batchUnit: opts.batchUnit,
        layout: opts.layout,
        whitenScope: opts.whitenScope,
        gamma: opts.gamma,
        maxLen: opts.maxLen,
        lossTokens: opts.lossTokens,
        dropZeroVarianceGroups: opts.dropZeroVarianceGroups,
        singleton: opts.singleton,
        overlong: opts.overlong,
        overlongBuffer: opts.overlongBuffer,
        klCoef: opts.klCoef,
        klEstimator: opts.klEstimator,
        groupSize: opts.groupSize,
        groupTimeoutMs: opts.groupTimeout,
        trainFlagged: opts.trainFlagged,
        maxStaleness: opts.maxStaleness,
        stale: opts.stale,
        trainSegments: opts.trainSegments,
        followDecisions: opts.followDecisions ? resolve(opts.followDecisions) : undefined,
        processMetrics: true,
        log: lineLogger(createLogger().child({ component: "core" })),
      });
      guardProcess({ log: (line) => console.error(`[rlgate] ${line}`), registry: core.metrics.registry });
      console.log(`rlgate core: trainer service on grpc://${core.address}${opts.tlsCert ? " (TLS)" : ""}`);
      console.log(
        `  gateways:   ${opts.gateway.length ? opts.gateway.join(", ") : "none (waiting for rlgate replay deliver --to-core)"}`,
      );
      console.log(
        `  estimator:  ${opts.estimator} (kernels: ${backend}), normalize ${opts.normalize}, loss ${opts.lossAgg}` +
          `${opts.maxLen ? ` (L ${opts.maxLen})` : ""}, singletons ${opts.singleton}, overlong ${opts.overlong}` +
          `${opts.overlong === "penalty" ? ` (buffer ${opts.overlongBuffer})` : ""}` +
          `${opts.klCoef > 0 ? `, KL in the reward ${opts.klCoef} x ${opts.klEstimator} (ref reports)` : ""}`,
      );
      console.log(
        `  batches:    ${opts.tokenBudget} tokens, whole ${opts.batchUnit}s, ${opts.layout} layout, loss weights over ${opts.lossTokens ?? opts.tokenBudget} tokens; groups of ${opts.groupSize || "declared size"}, timeout ${formatDuration(opts.groupTimeout)}`,
      );
      if (opts.maxStaleness !== undefined)
        console.log(`  staleness:  tokens older than current - ${opts.maxStaleness}: ${opts.stale}`);
      if (opts.gatewayApi.length)
        console.log(`  updates:    PausePolicy / ResumePolicy relayed to ${opts.gatewayApi.join(", ")}`);
      console.log(`  store:      ${resolve(opts.data)}`);
      if (core.plan)
        console.log(
          `  following:  ${core.plan.groups} groups and ${core.plan.batches} batch cuts recorded in ${resolve(opts.followDecisions)}`,
        );
      if (core.metricsUrl) console.log(`  metrics:    ${core.metricsUrl}`);
      const trainerTls = opts.tlsCert ? ` --tls-ca <CA of ${opts.tlsCert}>` : "";
      console.log(
        `  trainer:    ${DEFAULT_PYTHON} clients/python/example_trainer.py --core ${core.address}${trainerTls}`,
      );
      let closing = false;
      const shutdown = async () => {
        if (closing) return;
        closing = true;
        await core.close();
        process.exit(0);
      };
      process.on("SIGINT", shutdown);
      process.on("SIGTERM", shutdown);
    });
}
