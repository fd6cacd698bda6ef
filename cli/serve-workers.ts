// `rlgate serve --workers N`: N gateway processes (node:cluster) on one port and one LMDB store. The primary listens
// and hands each connection to a worker, and starts the built-in sim (once), the workers, and the one gRPC trajectory
// stream; it restarts a worker that dies and closes everything in order on SIGINT / SIGTERM. Each worker runs the
// whole HTTP gateway (see docs/deploy.md).
import type { ReasoningField } from "../tokenizer/reasoning-field.ts";
import { availableParallelism } from "node:os";
import { resolve } from "node:path";
import { InvalidArgumentError } from "commander";
import { collectDefaultMetrics, Registry } from "prom-client";
import type { Durability, Store } from "../store/store.ts";
import {
  chatFormatOption,
  refuseOpenHost,
  startGateway,
  trajectorySettingsOf,
  type GatewayOptions,
} from "../gateway/index.ts";
import { ClusterPrimary } from "../gateway/cluster/primary.ts";
import { startPrimaryStream, type PrimaryStream } from "../gateway/cluster/primary-stream.ts";
import { WorkerLink, type PrimaryChannel } from "../gateway/cluster/worker-link.ts";
import { DEFAULT_GRPC_PORT } from "../gateway/grpc/index.ts";
import type { PromptModeName } from "../gateway/prompts/index.ts";
import type { TrajectorySettings } from "../gateway/trajectories.ts";
import type { FlavorName } from "../gateway/upstream/flavor.ts";
import type { MaxTokensCapSetting } from "../gateway/upstream/max-tokens-cap.ts";
import { startSim, type SimOptions, type SimServer } from "../sim/index.ts";
import { familyOfModelDir } from "../tokenizer/model-format.ts";
import { guardProcess } from "../util/crash-guard.ts";
import { createLogger } from "../util/log.ts";
import { StartRefusal } from "../util/refusal.ts";

/** `rlgate serve`'s parsed options. */
export interface ServeOptions {
  upstream: string;
  upstreamsFile?: string;
  healthInterval: number;
  routing: GatewayOptions["routing"];
  upstreamApiKey?: string;
  upstreamFlavor: FlavorName;
  modelMap?: string[];
  prompts: PromptModeName;
  /** The vLLM version the built-in sim and tokens mode answer as (default `reasoning`: >= 0.17). */
  reasoningField?: ReasoningField;
  modelDir?: string;
  host: string;
  port: number;
  grpcPort?: number;
  grpcTlsCert?: string;
  grpcTlsKey?: string;
  grpcTlsClientCa?: string;
  grpcInsecure: boolean;
  memberTimeout: number;
  data: string;
  durability: Durability;
  storeMapSize: number;
  storeReserve: number;
  requireRollout: boolean;
  bodyLimit: number;
  publicUrl?: string;
  token?: string;
  requireKey?: boolean;
  metricsPublic: boolean;
  vocabSize?: number;
  upstreamTimeout: number;
  rolloutTimeout: number;
  simPort: number;
  routedExperts?: boolean;
  /** `--passthrough`: upstream routes harnesses may reach beyond the defaults. */
  passthrough?: string[];
  moeTopK?: number;
  moeExperts?: number;
  simMoeLayers?: number;
  trainSegments?: TrajectorySettings["trainSegments"];
  repairHistory: boolean;
  simMaxModelLen: number;
  maxTokensCap?: MaxTokensCapSetting;
  workers: number;
  /** `--retain`: ms after a rollout's finish that retention may remove it (absent: keep everything). */
  retain?: number;
}

/** Where the banner points. */
export interface ServeBanner {
  url: string;
  /** The replicas (the built-in sim's URL, with `sim`). */
  upstreams: string[];
  sim: boolean;
  /** The chat format's source, when loaded. */
  modelName: string | null;
  grpcAddress: string | null;
  /** The workers' process ids (null: one process). */
  workers: Array<number | null> | null;
}

/** The upstream the primary started (the built-in sim), handed to its workers. */
const UPSTREAM_ENV = "RLGATE_CLUSTER_UPSTREAM";

export function defaultWorkers(): number {
  const fromEnv = process.env.RLGATE_WORKERS;
  if (fromEnv !== undefined && fromEnv !== "") return workerCount(fromEnv);
  return availableParallelism();
}

export function workerCount(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1 || n > 256)
    throw new InvalidArgumentError(`expected a number of processes from 1 to 256, got '${value}'`);
  return n;
}

/** A gateway worker: the whole HTTP gateway on the shared port, without the trajectory stream (the primary's). */
export async function serveWorker(
  opts: ServeOptions,
  fileOnly: boolean,
  gatewayOptionsOf: (opts: ServeOptions, upstream: string | undefined) => GatewayOptions,
): Promise<void> {
  const slot = Number(process.env.RLGATE_WORKER_SLOT ?? 0);
  const slots = Number(process.env.RLGATE_WORKER_SLOTS ?? opts.workers);
  const link = new WorkerLink(slot, process as unknown as PrimaryChannel);
  const gateway = await startGateway({
    ...gatewayOptionsOf(opts, process.env[UPSTREAM_ENV] ?? (fileOnly ? undefined : opts.upstream)),
    grpcPort: null,
    worker: { slot, slots, link, port: Number(process.env.RLGATE_WORKER_PORT ?? opts.port) },
    log: createLogger().child({ component: "gateway", worker: slot }),
  });
  guardProcess({
    log: (line) => console.error(`[rlgate worker ${slot}] ${line}`),
    registry: gateway.context.metrics.registry,
  });
  let closing = false;
  const shutdown = async () => {
    if (closing) return;
    closing = true;
    link.close();
    await gateway.close().catch((error: unknown) => console.error(`[rlgate worker ${slot}] close: ${String(error)}`));
    process.exit(0);
  };
  link.onShutdown(shutdown); // the primary closes its workers first, then the stream and the sim
  process.on("disconnect", shutdown); // the primary is gone (killed): nothing restarts or reads this worker's calls
  process.on("SIGTERM", shutdown); // this worker alone is stopped: the primary starts another
  process.on("SIGINT", () => {}); // Ctrl-C reaches the whole process group: the primary closes the workers in order
  link.ready(gateway.url, gateway.port, gateway.context.upstream.urls);
}

/** The primary: the sim, the workers, the trajectory stream, one banner; restarts and shutdown. */
export async function servePrimary(
  opts: ServeOptions,
  fileOnly: boolean,
  ui: {
    printBanner: (opts: ServeOptions, at: ServeBanner) => void;
    startRetention: (store: Store, retainMs: number | undefined) => { stop(): Promise<void> } | null;
  },
): Promise<void> {
  const say = (line: string) => console.error(`[rlgate] ${line}`);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry }); // the primary's CPU and memory count in the sums too
  guardProcess({ log: say, registry });
  // The chat format is loaded here for the stream's turn rules (and refused here, once, when it cannot be).
  const format = chatFormatOption({ model: opts.modelDir ? resolve(opts.modelDir) : undefined, prompts: opts.prompts });
  let sim: SimServer | null = null;
  let stream: PrimaryStream | null = null;
  let upstream = fileOnly ? undefined : opts.upstream;
  let primary: ClusterPrimary | null = null;
  let retention: { stop(): Promise<void> } | null = null;
  let closing = false;
  const closeAll = async () => {
    closing = true;
    await retention?.stop();
    await primary?.close();
    await stream?.close().catch((error: unknown) => say(`trajectory stream close: ${String(error)}`));
    await sim?.close();
  };
  try {
    if (upstream === "sim") {
      sim = await startSim(builtInSimOptions(opts));
      upstream = sim.url;
    }
    const env: Record<string, string> = sim ? { [UPSTREAM_ENV]: sim.url } : {};
    refuseOpenHost(opts.host, opts.token); // before the primary listens, as one gateway refuses
    primary = new ClusterPrimary({ workers: opts.workers, host: opts.host, port: opts.port, env, log: say, registry });
    let address: { url: string; port: number; upstreams: string[] };
    try {
      address = await primary.start();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).syscall === "listen") throw error; // the port: said as one gateway says it
      throw new StartRefusal((error as Error).message);
    }
    stream = await startPrimaryStream({
      host: opts.host,
      port: opts.grpcPort ?? (opts.port === 0 ? 0 : DEFAULT_GRPC_PORT),
      tls: { cert: opts.grpcTlsCert, key: opts.grpcTlsKey, ca: opts.grpcTlsClientCa, insecure: opts.grpcInsecure },
      memberTimeoutMs: opts.memberTimeout,
      dataDir: resolve(opts.data),
      durability: opts.durability,
      storeMapSize: opts.storeMapSize,
      storeReserveBytes: opts.storeReserve,
      controlToken: opts.token ?? null,
      trajectories: trajectorySettingsOf({ trajectories: { trainSegments: opts.trainSegments } }, format),
      log: createLogger().child({ component: "gateway" }),
    });
    // The primary sweeps (its workers never do): one process removes what retention allows.
    retention = ui.startRetention(stream.store, opts.retain);
    const relay = primary;
    stream.store.events.on("agreement", (record) => relay.relayUi("agreement", record));
    ui.printBanner(opts, {
      url: address.url,
      upstreams: sim ? [sim.url] : address.upstreams,
      sim: sim !== null,
      modelName: format?.source ?? null,
      grpcAddress: stream.grpc.address,
      workers: primary.pids(),
    });
  } catch (error) {
    await closeAll().catch(() => {});
    throw error;
  }
  const shutdown = async () => {
    if (closing) return;
    await closeAll();
    process.exit(0);
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
}

/** The options the built-in sim is made of (`rlgate run` gives these for the sim of its own gateway). */
export type BuiltInSimSettings = Pick<
  ServeOptions,
  | "modelDir"
  | "simPort"
  | "upstreamFlavor"
  | "simMaxModelLen"
  | "routedExperts"
  | "simMoeLayers"
  | "moeTopK"
  | "moeExperts"
  | "reasoningField"
>;

/**
 * The built-in sim of `serve --upstream sim`: a MoE model answering routed experts with --routed-experts, and
 * answering in the tool-call syntax of --model-dir's family (Qwen3-Coder's XML calls and template for that family).
 */
export function builtInSimOptions(opts: BuiltInSimSettings): SimOptions {
  const family = opts.modelDir ? familyOfModelDir(resolve(opts.modelDir)) : null;
  return {
    port: opts.simPort,
    ...(family ? { toolCallParser: family.toolParser } : {}),
    flavor: opts.upstreamFlavor,
    maxModelLen: opts.simMaxModelLen,
    ...(opts.reasoningField ? { reasoningField: opts.reasoningField } : {}),
    ...(opts.routedExperts
      ? { moe: { layers: opts.simMoeLayers ?? 4, topK: opts.moeTopK ?? 2, experts: opts.moeExperts ?? 8 } }
      : {}),
  };
}
