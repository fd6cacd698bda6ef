// `rlgate serve`: the capture gateway, optionally with the simulated vLLM in the same process.
import { DEFAULT_PASSTHROUGH_ROUTES, PassthroughRouteError, PassthroughRoutes } from "../gateway/passthrough-routes.ts";
import { REASONING_FIELDS } from "../tokenizer/reasoning-field.ts";
import { Command, InvalidArgumentError, Option } from "commander";
import cluster from "node:cluster";
import { resolve } from "node:path";
import { startGateway, DEFAULT_BODY_LIMIT, type GatewayOptions } from "../gateway/index.ts";
import type { Store } from "../store/store.ts";
import { DEFAULT_GRPC_PORT } from "../gateway/grpc/index.ts";
import { FLAVOR_NAMES } from "../gateway/upstream/flavor.ts";
import { DEFAULT_HEALTH_INTERVAL_MS, ROUTINGS } from "../gateway/upstream/client.ts";
import { PROMPT_MODES } from "../gateway/prompts/index.ts";
import { DEFAULT_ROLLOUT_TIMEOUT_MS } from "../gateway/rollout-deadlines.ts";
import { parseMaxTokensCap, type MaxTokensCapSetting } from "../gateway/upstream/max-tokens-cap.ts";
import { startSim, type SimServer } from "../sim/index.ts";
import { DEFAULT_MAP_SIZE } from "../store/store.ts";
import { DEFAULT_STORE_RESERVE } from "../store/disk-space.ts";
import { familyOfParser } from "../tokenizer/families.ts";
import { vocabSizeOfModelDir } from "../tokenizer/model-format.ts";
import { TRAIN_SEGMENTS_HELP, trainSegmentsOption } from "./train-segments-option.ts";
import { guardProcess } from "../util/crash-guard.ts";
import { createLogger } from "../util/log.ts";
import { bytes, duration, integer } from "./option-parsers.ts";
import { RetentionSweep } from "../store/retention.ts";
import { formatAge } from "./store-command.ts";
import {
  defaultWorkers,
  servePrimary,
  serveWorker,
  workerCount,
  type ServeBanner,
  type ServeOptions,
  builtInSimOptions,
  type BuiltInSimSettings,
} from "./serve-workers.ts";

/** The built-in sim's context: room for agent harnesses' default max_tokens (32k) on top of a 20–30k-token prompt. */
export const DEFAULT_SIM_MAX_MODEL_LEN = 131_072;

function capSetting(value: string): MaxTokensCapSetting {
  try {
    return parseMaxTokensCap(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message.replace(/^--max-tokens-cap: /, ""));
  }
}

export function serveCommand(): Command {
  return new Command("serve")
    .summary("the capture gateway a harness is pointed at (with the simulated vLLM by default)")
    .description(
      "Run the capture gateway. Harnesses use http://HOST:PORT/r/{rolloutId}/v1 (or a rollout key, or the " +
        "x-rlgate-rollout header) as their OpenAI base URL; create rollouts with POST /api/rollouts.",
    )
    .option(
      "--upstream <url[,url…]|sim>",
      "inference server base URL (vLLM >= 0.10.2), several replicas' URLs separated by commas (each rollout's calls stay on one replica; see docs/replicas.md), or 'sim' for the built-in simulated vLLM",
      process.env.RLGATE_UPSTREAM ?? "sim",
    )
    .option(
      "--upstreams-file <file>",
      "a file listing replica URLs, one a line (# comments), reloaded when it changes (an autoscaled fleet); a bad edit keeps the current list and is logged. With --upstream, both lists are used",
      process.env.RLGATE_UPSTREAMS_FILE,
    )
    .option(
      "--health-interval <duration>",
      "how often each replica's GET /health is checked when there are several (2 failures eject it, 2 passes bring it back)",
      duration,
      DEFAULT_HEALTH_INTERVAL_MS,
    )
    .addOption(
      new Option(
        "--routing <routing>",
        "for bench/replicas.ts: round-robin sends every call to the next replica, ignoring rollouts (the baseline sticky routing is measured against)",
      )
        .choices([...ROUTINGS])
        .default("sticky")
        .hideHelp(),
    )
    .option("--upstream-api-key <key>", "bearer token sent to the upstream", process.env.RLGATE_UPSTREAM_API_KEY)
    .addOption(
      new Option(
        "--upstream-flavor <flavor>",
        "the inference server behind --upstream: how token ids are requested and read back (sglang: streamed chat calls go upstream unstreamed and are re-emitted)",
      )
        .choices([...FLAVOR_NAMES])
        .default(process.env.RLGATE_UPSTREAM_FLAVOR ?? "vllm"),
    )
    .option(
      "--model-map <pattern=model,...>",
      "rewrite requested model names to the served one, globs tried in order (e.g. 'claude-*=Qwen/Qwen3-8B,gpt-*=Qwen/Qwen3-8B'); repeatable",
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .addOption(
      new Option(
        "--prompts <mode>",
        "messages: the harness's messages go upstream as chat and the upstream renders them; tokens: rlgate renders prompts with the model's chat template, continues each agent thread from the exact ids the model saw and sampled, and sends ids to /v1/completions (one trajectory per agent thread; see docs/prompt-modes.md)",
      )
        .choices([...PROMPT_MODES])
        .default(process.env.RLGATE_PROMPTS ?? "messages"),
    )
    .addOption(
      new Option(
        "--reasoning-field <name>",
        "the vLLM version answered as where rlgate answers itself (--prompts tokens, and the built-in sim): reasoning (vLLM >= 0.17: message.reasoning / delta.reasoning, a history message's reasoning_content not rendered) or reasoning_content (vLLM <= 0.16); it also tells history repair which name the upstream renders (default: reasoning; SGLang: reasoning_content)",
      ).choices([...REASONING_FIELDS]),
    )
    .option(
      "--model-dir <dir>",
      "the served model's Hugging Face files (tokenizer.json, tokenizer_config.json with chat_template, generation_config.json): its chat format for --prompts tokens and the trajectories' turn rules (default: Qwen3, built in)",
      process.env.RLGATE_MODEL_DIR,
    )
    .option("--host <host>", "address to listen on (beyond loopback a --token is required)", "127.0.0.1")
    .option("--port <port>", "port to listen on", integer, 8700)
    .option(
      "--grpc-port <port>",
      "port of the gRPC trajectory stream that RL cores read, same host and --token (default 8701; 0 with --port 0)",
      integer,
    )
    .option(
      "--grpc-tls-cert <file>",
      "PEM certificate of the trajectory stream (TLS; required beyond loopback unless --grpc-insecure)",
      process.env.RLGATE_GRPC_TLS_CERT,
    )
    .option("--grpc-tls-key <file>", "PEM private key of --grpc-tls-cert", process.env.RLGATE_GRPC_TLS_KEY)
    .option(
      "--grpc-tls-client-ca <file>",
      "require RL cores' client certificates signed by this PEM CA (mutual TLS)",
      process.env.RLGATE_GRPC_TLS_CLIENT_CA,
    )
    .option(
      "--grpc-insecure",
      "serve the trajectory stream in plaintext beyond loopback (tokens cross the network unencrypted)",
      process.env.RLGATE_GRPC_INSECURE === "1",
    )
    .option(
      "--member-timeout <duration>",
      "how long an RL core's rollouts and groups wait for it while it is away (restarting) before they go to other cores of its consumer group",
      duration,
      60_000,
    )
    .option(
      "--rollout-timeout <duration>",
      "finish a rollout still open this long after its creation as 'timeout', without a reward (metadata.finished_by = deadline), so a harness that died never holds its RL group; a rollout's own deadline_s overrides it; 0: never. The default (1h) outlasts agent runs and still frees the group's slot within the session",
      duration,
      DEFAULT_ROLLOUT_TIMEOUT_MS,
    )
    .option("--data <dir>", "directory of the LMDB store", process.env.RLGATE_DATA ?? ".rlgate/data")
    .option(
      "--retain <duration>",
      "remove rollouts finished longer ago than this (e.g. 12h, 7d) once every consumer group has acknowledged them, with their calls, in a periodic sweep; their space is reused. Off by default (the store keeps everything). A consumer group that stops reading holds retention at its cursor (rlgate store stats names it); a backbone is kept while a branch of it is open (docs/deploy.md)",
      duration,
    )
    .addOption(
      new Option(
        "--durability <mode>",
        "commit: a call is committed (safe from a process kill) before the harness gets its last byte; flush: also synced to disk",
      )
        .choices(["commit", "flush"])
        .default("commit"),
    )
    .option(
      "--store-map-size <size>",
      "address space the store's memory map reserves, not disk (e.g. 1tb, 4tb): a store below it is never remapped while other threads and workers read it; set it above the store's expected size (docs/deploy.md)",
      bytes,
      DEFAULT_MAP_SIZE,
    )
    .option(
      "--store-reserve <size>",
      "free space kept on the store's filesystem: below it new calls, finishes and rollouts are refused (507 RLGATE_STORE_FULL, nothing recorded) until space returns; 0: refuse only once a write fails for lack of space",
      bytes,
      DEFAULT_STORE_RESERVE,
    )
    .option(
      "--require-rollout",
      "refuse calls that no rollout claims (default: forward and record them as unattributed)",
      false,
    )
    .option("--body-limit <size>", "largest accepted request body", bytes, DEFAULT_BODY_LIMIT)
    .option("--public-url <url>", "base URL harnesses reach this gateway at (default: from the request's Host header)")
    .option(
      "--token <token>",
      "bearer token for the control API and /metrics (required when --host is not loopback)",
      process.env.RLGATE_TOKEN,
    )
    .option(
      "--require-key",
      "harness calls must carry their rollout's key (Authorization: Bearer rlk_… or x-api-key); default: on with --token or beyond loopback",
    )
    .option(
      "--no-require-key",
      "accept harness calls without a rollout key even with --token (anyone who reaches the port can write into a rollout)",
    )
    .option("--metrics-public", "serve /metrics without the control token", false)
    .option(
      "--vocab-size <n>",
      "token ids of the served model: ids the upstream reports at or above it flag the call (default: --model-dir's config.json vocab_size, else known for Qwen3, Llama 3 and gpt-oss by model name)",
      integer,
    )
    .option(
      "--upstream-timeout <duration>",
      "max wait for upstream headers and between body chunks (e.g. 30s, 10m)",
      duration,
      600_000,
    )
    .option(
      "--sim-port <port>",
      "port of the built-in simulated vLLM when --upstream sim (0 = any free port)",
      integer,
      0,
    )
    .option("--train-segments <kinds>", TRAIN_SEGMENTS_HELP, trainSegmentsOption)
    .option(
      "--no-repair-history",
      "forward chat histories as the harness sent them (default: earlier assistant turns are put back as the model sampled them where the harness changed them in a way the chat template does not undo, so each prompt extends the earlier prompt + completion; see docs/trajectories.md)",
    )
    .option(
      "--sim-max-model-len <tokens>",
      "context length of the built-in simulated vLLM (harnesses ask for up to 32k output tokens on top of 17k-27k-token prompts)",
      integer,
      DEFAULT_SIM_MAX_MODEL_LEN,
    )
    .option(
      "--routed-experts",
      "MoE routing replay (R3): ask the upstream for the experts each token was routed to and keep them per token, stored once per unique token, carried to RL cores and trainers beside the token ids (vLLM: start it with --enable-return-routed-experts, streamed calls are then served from whole responses re-emitted as streams; SGLang: return_routed_experts with routed_experts_start_len, needs --moe-top-k). See docs/routing-replay.md",
    )
    .option(
      "--moe-top-k <k>",
      "with --routed-experts: experts per token and layer (SGLang's payload does not carry its shape; the built-in sim routes this many, default 2)",
      integer,
    )
    .option(
      "--moe-experts <n>",
      "with --routed-experts: experts per layer, to keep indexes as uint8 (≤ 256) or uint16 (default: from the values; the built-in sim has this many, default 8)",
      integer,
    )
    .addOption(
      new Option("--sim-moe-layers <n>", "MoE layers of the built-in sim with --routed-experts (default 4)")
        .argParser(integer)
        .hideHelp(),
    )
    .option(
      "--max-tokens-cap <auto|N>",
      "lower a harness's max_tokens before it goes upstream: to N, or (auto) to the model's context length minus the prompt, so an over-eager default does not fail the call; recorded on the call when applied",
      capSetting,
    )
    .option(
      "--passthrough <routes>",
      `more upstream routes harnesses may reach without capture, as '[METHOD ]/path' or '[METHOD ]/path/*', comma-separated, repeatable (default: only ${DEFAULT_PASSTHROUGH_ROUTES.join(", ")}; every other upstream route, e.g. /v1/load_lora_adapter, answers 404 to harnesses)`,
      passthroughRoutes,
    )
    .addOption(
      new Option(
        "--workers <n>",
        "gateway processes sharing the port and the store (1: one process); the primary keeps the built-in sim, the trajectory stream and /metrics' sums (docs/deploy.md)",
      )
        .argParser(workerCount)
        .default(defaultWorkers(), `RLGATE_WORKERS or the machine's cores, here ${defaultWorkers()}`),
    )
    .action(async (opts: ServeOptions, command: Command) => {
      // An upstreams file alone names the replicas: the default (the built-in sim) is not added to them.
      const fileOnly = Boolean(opts.upstreamsFile) && command.getOptionValueSource("upstream") === "default";
      if (cluster.isWorker) return serveWorker(opts, fileOnly, gatewayOptionsOf);
      if (opts.workers > 1) return servePrimary(opts, fileOnly, { printBanner: printServeBanner, startRetention });
      let sim: SimServer | null = null;
      let upstream: string | undefined = fileOnly ? undefined : opts.upstream;
      if (upstream === "sim") {
        sim = await startSim(builtInSimOptions(opts));
        upstream = sim.url;
      }
      const gateway = await startGateway({
        ...gatewayOptionsOf(opts, upstream),
        grpcPort: opts.grpcPort ?? (opts.port === 0 ? 0 : DEFAULT_GRPC_PORT),
        log: createLogger().child({ component: "gateway" }),
      });
      guardProcess({ log: (line) => console.error(`[rlgate] ${line}`), registry: gateway.context.metrics.registry });
      const retention = startRetention(gateway.context.store, opts.retain);
      printServeBanner(opts, {
        url: gateway.url,
        upstreams: sim ? [sim.url] : gateway.context.upstream.urls,
        sim: sim !== null,
        modelName: gateway.context.tokenPrompts?.format.source ?? null,
        grpcAddress: gateway.grpc?.address ?? null,
        workers: null,
      });
      let closing = false;
      const shutdown = async () => {
        if (closing) return;
        closing = true;
        await retention?.stop();
        await gateway.close();
        await sim?.close();
        process.exit(0);
      };
      process.on("SIGINT", shutdown);
      process.on("SIGTERM", shutdown);
    });
}

/** `serve --retain`: the sweep of the one process that sweeps the store (the primary with --workers). */
export function startRetention(store: Store, retainMs: number | undefined): RetentionSweep | null {
  if (retainMs === undefined) return null;
  const log = createLogger().child({ component: "retention" });
  return new RetentionSweep(store.tables(), retainMs, (line) => log.info(line)).start();
}

/** What `rlgate serve`'s options make of a gateway (its gRPC port and logger are the caller's). */
export function gatewayOptionsOf(opts: ServeOptions, upstream: string | undefined): GatewayOptions {
  return {
    upstream,
    upstreamsFile: opts.upstreamsFile ? resolve(opts.upstreamsFile) : undefined,
    healthIntervalMs: opts.healthInterval,
    routing: opts.routing,
    upstreamApiKey: opts.upstreamApiKey,
    upstreamFlavor: opts.upstreamFlavor,
    modelMap: opts.modelMap ?? process.env.RLGATE_MODEL_MAP,
    host: opts.host,
    port: opts.port,
    grpcTls: {
      cert: opts.grpcTlsCert,
      key: opts.grpcTlsKey,
      ca: opts.grpcTlsClientCa,
      insecure: opts.grpcInsecure,
    },
    grpcMemberTimeoutMs: opts.memberTimeout,
    dataDir: resolve(opts.data),
    durability: opts.durability,
    storeMapSize: opts.storeMapSize,
    storeReserveBytes: opts.storeReserve,
    requireRollout: opts.requireRollout,
    bodyLimitBytes: opts.bodyLimit,
    publicUrl: opts.publicUrl,
    controlToken: opts.token,
    requireKey: opts.requireKey,
    metricsPublic: opts.metricsPublic,
    upstreamTimeoutMs: opts.upstreamTimeout,
    rolloutTimeoutMs: opts.rolloutTimeout,
    trajectories: { trainSegments: opts.trainSegments },
    repairHistory: opts.repairHistory,
    maxTokensCap: opts.maxTokensCap ?? null,
    routedExperts: opts.routedExperts ? { topK: opts.moeTopK ?? null, experts: opts.moeExperts ?? null } : null,
    passthrough: opts.passthrough ?? [],
    processMetrics: true,
    prompts: opts.prompts,
    ...(opts.reasoningField ? { reasoningField: opts.reasoningField } : {}),
    ...modelDirOptions(opts.modelDir, opts.vocabSize),
  };
}

/**
 * What --model-dir gives a gateway: its chat format (prompts, history repair, turn rules) and the bound of the ids its
 * upstream reports (--vocab-size, else config.json's vocab_size).
 */
export function modelDirOptions(
  modelDir: string | undefined,
  vocabSize?: number,
): Pick<GatewayOptions, "model" | "vocabSize"> {
  return {
    vocabSize: vocabSize ?? (modelDir ? vocabSizeOfModelDir(resolve(modelDir)) : undefined),
    model: modelDir ? resolve(modelDir) : undefined,
  };
}

/** The built-in sim's family and tool parser, as the banner names them. */
export function simFamily(opts: BuiltInSimSettings): string {
  const parser = builtInSimOptions(opts).toolCallParser ?? "hermes";
  return `${familyOfParser(parser).name.replace(/ \(.*\)$/, "")}, ${parser} tool calls`;
}

/** The start-up banner, printed once (by the primary, with workers). */
export function printServeBanner(opts: ServeOptions, at: ServeBanner): void {
  const u = at.url;
  console.log(`rlgate gateway listening on ${u}`);
  console.log(
    `  upstream:      ${at.sim ? `${at.upstreams[0]} (built-in simulated ${opts.upstreamFlavor}, ${simFamily(opts)}, ${opts.simMaxModelLen}-token context)` : `${at.upstreams.join(", ")} (${opts.upstreamFlavor})`}`,
  );
  if (at.upstreams.length > 1 || opts.upstreamsFile)
    console.log(
      `  replicas:      ${at.upstreams.length}, ${opts.routing === "sticky" ? "each rollout on one replica" : opts.routing}${opts.upstreamsFile ? `, following ${resolve(opts.upstreamsFile)}` : ""}`,
    );
  console.log(`  store:         ${resolve(opts.data)}`);
  if (opts.retain !== undefined)
    console.log(
      `  retention:     rollouts finished over ${formatAge(opts.retain)} ago and acknowledged by every consumer group are removed`,
    );
  if (at.workers)
    console.log(`  workers:       ${at.workers.length} (pids ${at.workers.join(", ")}), sharing the port`);
  const modelName = at.modelName ?? (opts.modelDir ? resolve(opts.modelDir) : "Qwen3 (built in)");
  console.log(`  prompts:       ${opts.prompts}${opts.prompts === "tokens" ? ` (chat format: ${modelName})` : ""}`);
  console.log(`  harness base:  ${u}/v1  (unattributed)   or   ${u}/r/<rolloutId>/v1  (per rollout)`);
  console.log(
    `  new rollout:   curl -s -X POST ${u}/api/rollouts -H 'content-type: application/json' -d '{"group":"g1"}'`,
  );
  console.log(`  metrics:       ${u}/metrics   health: ${u}/healthz`);
  console.log(`  live UI:       ${u}/ui${opts.token ? "#token=<the --token>" : ""}`);
  if (at.grpcAddress) {
    const tls = opts.grpcTlsCert ? ` --gateway-tls-ca <CA of ${opts.grpcTlsCert}>` : "";
    console.log(
      `  trajectories:  grpc://${at.grpcAddress}${opts.grpcTlsCert ? " (TLS)" : ""}  (rlgate core --gateway ${at.grpcAddress}${tls})`,
    );
  }
}

/** `--passthrough` values, accumulated over repeats and checked as they are given. */
function passthroughRoutes(value: string, previous: string[] | undefined): string[] {
  const routes = [
    ...(previous ?? []),
    ...value
      .split(",")
      .map((spec) => spec.trim())
      .filter(Boolean),
  ];
  try {
    new PassthroughRoutes(routes);
  } catch (error) {
    if (error instanceof PassthroughRouteError) throw new InvalidArgumentError(error.message);
    throw error;
  }
  return routes;
}
