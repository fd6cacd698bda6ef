// Starts a capture gateway: store, upstream pool, metrics and the HTTP server, and closes them in order.
import type { ReasoningField } from "../tokenizer/reasoning-field.ts";
import type { AddressInfo } from "node:net";
import { isLoopbackHost } from "../protocol/options.ts";
import { StartRefusal } from "../util/refusal.ts";
import { listen } from "../util/listen.ts";
import { Store, type Durability } from "../store/store.ts";
import type { GatewayContext } from "./context.ts";
import { startGatewayGrpc, type GatewayGrpc } from "./grpc/index.ts";
import type { TlsFiles } from "../protocol/tls.ts";
import { GatewayMetrics } from "./metrics.ts";
import { PolicyGate } from "./policy/gate.ts";
import { PolicyMetrics } from "./policy/metrics.ts";
import { ReplicaPauser } from "./policy/upstream-pause.ts";
import { createGatewayServer } from "./server.ts";
import type { TrajectorySettings } from "./trajectories.ts";
import { TrajectoryThread } from "./trajectory-thread.ts";
import { Upstream, type Routing } from "./upstream/client.ts";
import { parseUpstreamList, UpstreamListError } from "./upstream/upstream-list.ts";
import { selectUpstreamFlavor, type FlavorName } from "./upstream/flavor.ts";
import type { MaxTokensCapSetting } from "./upstream/max-tokens-cap.ts";
import { ModelMap } from "./upstream/model-map.ts";
import { PromptIndex } from "../trajectory/prompt-index.ts";
import { HistoryRepair, turnRulesOf } from "./repair/index.ts";
import { chatFormatOf } from "../trajectory/chat-format.ts";
import { loadModelChatFormat, qwen3ChatFormat, type ModelChatFormat } from "../tokenizer/model-format.ts";
import { TokenPrompts, type PromptModeName } from "./prompts/index.ts";
import { silentLogger, type Logger } from "../util/log.ts";
import type { RoutedExpertsSetting } from "./upstream/routed-experts.ts";
import type { WorkerLink } from "./cluster/worker-link.ts";
import { RolloutDeadlines } from "./rollout-deadlines.ts";
import { RecentIdListsByRollout } from "./upstream/id-list.ts";
import { PassthroughRoutes } from "./passthrough-routes.ts";

export interface GatewayOptions {
  /** Base URL of the inference server (vLLM, SGLang, `rlgate sim`), or of several replicas (`A,B` or a list). */
  upstream?: string | readonly string[];
  /** A file listing replica URLs (one a line, `#` comments), watched for changes; with or instead of `upstream`. */
  upstreamsFile?: string;
  /** How often each replica's /health is checked when there are several (default 5 s). */
  healthIntervalMs?: number;
  /** sticky (default): a rollout's calls stay on one replica; round-robin: a baseline for bench/replicas.ts. */
  routing?: Routing;
  upstreamApiKey?: string;
  /** Which inference server the upstream is (default vllm): decides how token ids are requested and read. */
  upstreamFlavor?: FlavorName;
  /** Requested model → served model, as `claude-*=Qwen/Qwen3-8B[,…]` specs or a ModelMap. */
  modelMap?: string | readonly string[] | ModelMap;
  host?: string;
  /** Default 8700; 0 picks a free port. */
  port?: number;
  /** LMDB directory. */
  dataDir: string;
  durability?: Durability;
  /** The store's memory map size (default: the store's `DEFAULT_MAP_SIZE`). */
  storeMapSize?: number;
  /** Free bytes below which the store refuses calls, finishes and new rollouts (default: `DEFAULT_STORE_RESERVE`). */
  storeReserveBytes?: number;
  requireRollout?: boolean;
  /** Default 100 MB. */
  bodyLimitBytes?: number;
  publicUrl?: string;
  controlToken?: string;
  /** Harness calls need their rollout's key; default: on with a control token or beyond loopback. */
  requireKey?: boolean;
  /** /metrics answers without the control token (default: it needs it, when one is set). */
  metricsPublic?: boolean;
  /** Token ids the served model has; default: known for Qwen3, else any int32 id is accepted. */
  vocabSize?: number;
  upstreamTimeoutMs?: number;
  trajectories?: TrajectorySettings;
  /** Put back earlier assistant turns as the model sampled them before forwarding (default true). */
  repairHistory?: boolean;
  processMetrics?: boolean;
  /** The process's logger (util/log.ts createLogger); default silent. */
  log?: Logger;
  /** Port of the gRPC trajectory stream (the CLI's default is 8701; 0 picks a free port); unset or null: no gRPC server. */
  grpcPort?: number | null;
  /** Largest gRPC message (a rollout's trajectories); default 512 MiB. */
  grpcMaxMessageBytes?: number;
  /** TLS of the trajectory stream: required when it listens beyond loopback, unless `insecure`. */
  grpcTls?: TlsFiles;
  /** How long a consumer group member's rollouts wait for it while it is away (default 60 s). */
  grpcMemberTimeoutMs?: number;
  /** messages (default): the upstream renders the harness's messages; tokens: rlgate renders them and sends ids. */
  prompts?: PromptModeName;
  /**
   * The vLLM version tokens mode answers as: `reasoning` (default, vLLM >= 0.17) or `reasoning_content` (<= 0.16),
   * the name answers carry reasoning under and the history field rendered (tokenizer/reasoning-field.ts).
   */
  reasoningField?: ReasoningField;
  /** The served model's chat format: a Hugging Face model directory, or a loaded format (default: Qwen3, built in). */
  model?: string | ModelChatFormat;
  /** Lower harnesses' max_tokens: to N, or (auto) to the upstream's context length minus the prompt. */
  maxTokensCap?: MaxTokensCapSetting;
  /** MoE routing replay (`serve --routed-experts`): ask the upstream for routed experts and keep them per token. */
  routedExperts?: RoutedExpertsSetting | null;
  /** Upstream routes harnesses may reach without capture beyond the defaults (`[METHOD ]/path[/*]`, --passthrough). */
  passthrough?: readonly string[];
  /**
   * A new rollout without its own `deadline_s` is finished as `timeout` this long after its creation, if still open
   * (`serve --rollout-timeout`, whose default is DEFAULT_ROLLOUT_TIMEOUT_MS); unset or 0: no deadline but its own.
   */
  rolloutTimeoutMs?: number;
  /** How often due rollouts are looked for (default 1 s). */
  deadlineSweepMs?: number;
  /**
   * This gateway is worker `slot` of `slots` of `rlgate serve --workers N`, sharing the store (gateway/cluster/):
   * it serves the connections the primary accepts on `port` and hands it (the `port` option is not listened on).
   */
  worker?: { slot: number; slots: number; link: WorkerLink; port: number };
}

export interface Gateway {
  url: string;
  port: number;
  context: GatewayContext;
  /** The trajectory stream's server, when grpcPort was given. */
  grpc: GatewayGrpc | null;
  /** Finishes rollouts still open at their deadline (swept every `deadlineSweepMs`; `sweep()` runs one now). */
  deadlines: RolloutDeadlines;
  close(): Promise<void>;
}

export const DEFAULT_BODY_LIMIT = 100 * 1024 * 1024;

/** The served model's chat format, when given or needed: the built-in Qwen3 tokenizer takes ~1 s to load. */
export function chatFormatOption(options: Pick<GatewayOptions, "model" | "prompts">): ModelChatFormat | null {
  if (typeof options.model === "string") return loadModelChatFormat(options.model);
  return options.model ?? (options.prompts === "tokens" ? qwen3ChatFormat() : null);
}

/** How finished rollouts become trajectories: the options' settings, with the model's turn rules. */
export function trajectorySettingsOf(
  options: Pick<GatewayOptions, "trajectories">,
  format: ModelChatFormat | null,
): TrajectorySettings {
  const settings: TrajectorySettings = { ...options.trajectories };
  if (format && !settings.chatFormat) settings.chatFormat = chatFormatOf(format);
  return settings;
}

/** A gateway beyond loopback requires a control token: otherwise it refuses to start. */
export function refuseOpenHost(host: string, controlToken: string | null | undefined): void {
  if (isLoopbackHost(host) || controlToken) return;
  throw new StartRefusal(
    `refusing to listen on ${host} without a control token: the control API and every rollout would be open to the network (pass --token or set RLGATE_TOKEN)`,
  );
}

/** The URL a gateway listening on `host`:`port` is reached at (a wildcard host: through loopback). */
function gatewayUrl(host: string, port: number): string {
  const shownHost = host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host;
  return `http://${shownHost}:${port}`;
}

export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const host = options.host ?? "127.0.0.1";
  refuseOpenHost(host, options.controlToken);
  const format = chatFormatOption(options);
  const { worker } = options;
  const log = options.log ?? silentLogger;
  let upstream: Upstream;
  try {
    upstream = new Upstream({
      urls: options.upstream === undefined ? [] : parseUpstreamList(options.upstream),
      file: options.upstreamsFile,
      apiKey: options.upstreamApiKey,
      headersTimeoutMs: options.upstreamTimeoutMs,
      bodyTimeoutMs: options.upstreamTimeoutMs,
      healthIntervalMs: options.healthIntervalMs,
      routing: options.routing,
      log,
    });
  } catch (error) {
    if (error instanceof UpstreamListError) throw new StartRefusal(error.message);
    throw error;
  }
  const store = new Store({
    path: options.dataDir,
    durability: options.durability,
    promptIndex: new PromptIndex(),
    shared: worker && { slot: worker.slot, slots: worker.slots },
    ...(options.storeMapSize === undefined ? {} : { mapSize: options.storeMapSize }),
    space: { reserveBytes: options.storeReserveBytes, log: (line) => log.warn(line) },
  });
  const trajectorySettings = trajectorySettingsOf(options, format);
  const metrics = new GatewayMetrics({ processMetrics: options.processMetrics });
  const upstreamFlavor = selectUpstreamFlavor(options.upstreamFlavor);
  const policy = new PolicyGate(
    new ReplicaPauser(upstreamFlavor.name, () => upstream.replicas, options.upstreamApiKey),
    new PolicyMetrics(metrics.registry),
    log,
  );
  const context: GatewayContext = {
    store,
    upstream,
    flavor: upstreamFlavor,
    modelMap: options.modelMap instanceof ModelMap ? options.modelMap : ModelMap.parse(options.modelMap),
    metrics,
    policy,
    config: {
      bodyLimitBytes: options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT,
      requireRollout: options.requireRollout ?? false,
      publicUrl: options.publicUrl ?? null,
      controlToken: options.controlToken ?? null,
      requireKey: options.requireKey ?? (Boolean(options.controlToken) || !isLoopbackHost(host)),
      metricsPublic: options.metricsPublic ?? false,
      vocabSize: options.vocabSize ?? null,
      trajectories: trajectorySettings,
      maxTokensCap: options.maxTokensCap ?? null,
      rolloutTimeoutMs: options.rolloutTimeoutMs ?? 0,
      routedExperts: options.routedExperts ?? null,
      passthrough: new PassthroughRoutes(options.passthrough),
    },
    tokenPrompts:
      options.prompts === "tokens"
        ? new TokenPrompts({ store }, format ?? qwen3ChatFormat(), { reasoningField: options.reasoningField })
        : null,
    trajectories: new TrajectoryThread(options.dataDir, trajectorySettings, store.mapSize),
    recentPromptIds: new RecentIdListsByRollout(),
    repair:
      options.repairHistory === false
        ? null
        : new HistoryRepair(store, {
            ...(trajectorySettings.chatFormat ? { format: trajectorySettings.chatFormat } : {}),
            ...(format ? { rules: turnRulesOf(format.family) } : {}),
            // SGLang renders `reasoning_content`; vLLM the name of the version it is (default: >= 0.17's).
            reasoningField:
              options.reasoningField ?? (options.upstreamFlavor === "sglang" ? "reasoning_content" : "reasoning"),
          }),
    log,
    secrets: {
      controlToken: options.controlToken ?? null,
      isRolloutKey: (candidate) => store.rolloutIdForKey(candidate) !== undefined,
    },
    cluster: worker?.link,
  };
  context.metrics.observeReplicas(() => upstream.replicas);
  worker?.link.attach(store, context.metrics.registry);
  if (worker) {
    // One pause for all workers: each tells the others the state its pause or resume reached.
    policy.onChange = (state) => worker.link.sendPolicy(state);
    worker.link.onPolicy((state) => policy.apply(state));
  }
  const { server, passthrough } = createGatewayServer(context);
  let grpc: GatewayGrpc | null = null;
  const deadlines = new RolloutDeadlines(context, options.deadlineSweepMs);

  /** Closes every part, also when one fails (the first failure is thrown at the end), and after a failed start. */
  const closeAll = async () => {
    let failure: unknown = null;
    const step = async (close: () => unknown) => {
      try {
        await close();
      } catch (error) {
        failure ??= error;
      }
    };
    await step(() => grpc?.close());
    await step(() => policy.close());
    await step(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    );
    await step(() => passthrough.close());
    await step(() => upstream.close());
    await step(() => deadlines.close());
    await step(() => context.trajectories.close());
    await step(() => store.close());
    if (failure !== null) throw failure;
  };

  // The trajectory worker boots (~0.5 s) while the server starts listening, so a gateway that says it listens answers
  // a finish, or delivers a rollout to an RL core, without that wait.
  const workerReady = context.trajectories.ready();
  workerReady.catch(() => {}); // awaited below, unless listening failed first
  try {
    if (worker) {
      // Node's http.Server checks its connections' header and request timeouts only once it listens: a worker listens
      // on a loopback port of its own (nothing is sent there) and serves the connections its primary hands it.
      await listen(server, { port: 0, host: "127.0.0.1", exclusive: true });
      worker.link.serveConnections((socket) => {
        server.emit("connection", socket);
        socket.resume();
      });
    } else {
      await listen(server, { port: options.port ?? 8700, host });
    }
    await workerReady;
    if (options.grpcPort !== undefined && options.grpcPort !== null) {
      grpc = await startGatewayGrpc(context, {
        host,
        port: options.grpcPort,
        maxMessageBytes: options.grpcMaxMessageBytes,
        tls: options.grpcTls,
        memberTimeoutMs: options.grpcMemberTimeoutMs,
      });
    }
  } catch (error) {
    await closeAll().catch(() => {}); // the start's failure is the one to report
    throw error;
  }
  const port = worker?.port ?? (server.address() as AddressInfo).port;
  return {
    url: gatewayUrl(host, port),
    port,
    context,
    grpc,
    deadlines,
    close: closeAll,
  };
}
