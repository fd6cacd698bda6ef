// The RL core: reads finished rollouts from one or more gateways' trajectory streams, groups them, computes
// advantages (rl-core/estimators on the native kernels), packs batches by a token budget, and serves them to
// trainers over gRPC. Everything it needs to resume is in its own store (core-store.ts); a rollout is acked to
// its gateway only once its group's rows are committed there, so a crash at any point loses nothing, and a
// rollout delivered again is recognised and skipped.
import { StartRefusal } from "../../util/refusal.ts";
import { randomBytes } from "node:crypto";
import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { Server } from "@grpc/grpc-js";
import { TrajectoryConsumer } from "../../clients/ts/trajectory-consumer.ts";
import type { NormalizeBy } from "../estimators/index.ts";
import type { LossAggMode } from "../kernels/index.ts";
import {
  bindServer,
  channelCredentials,
  DEFAULT_MAX_MESSAGE_BYTES,
  dialAddress,
  grpcTarget,
  isLoopbackHost,
  serverCredentials,
  serverOptions,
  shutdownServer,
  trainerService,
  type CoreStatus,
  type RolloutMessage,
  type TlsFiles,
} from "../../protocol/index.ts";
import { BatchPacker } from "./batch-packer.ts";
import { CoreStore, type PendingRollout, type StoredBatch } from "./core-store.ts";
import { groupAdvantages, type CoreEstimator } from "./group-advantages.ts";
import { declaredGroupSize, groupKeyOf, GroupTracker, type PendingGroup } from "./groups.ts";
import { CoreMetrics } from "./metrics.ts";
import { TrainerService, type BatchSource } from "./trainer-service.ts";
import { trainedRows } from "./train-segments.ts";

export { CORE_ESTIMATORS, type CoreEstimator } from "./group-advantages.ts";

export const DEFAULT_CORE_PORT = 8702;
export const DEFAULT_TOKEN_BUDGET = 65_536;

export interface CoreOptions {
  /** Gateways' gRPC addresses (host:port). */
  gateways: readonly string[];
  /** Bearer token for the gateways (their --token). */
  gatewayToken?: string | null;
  /** TLS to the gateways (CA, client certificate); default: TLS with the system's roots beyond loopback. */
  gatewayTls?: TlsFiles;
  consumerGroup?: string;
  /** This core's name in the consumer group; default: host name and a random id, kept in its store across restarts. */
  member?: string;
  /** Unacked rollouts the core may hold per gateway (≥ groups in flight × group size). Default 1024. */
  maxInFlight?: number;
  leaseTimeoutMs?: number;
  host?: string;
  /** Trainer service port; default 8702, 0 = any free port. */
  port?: number;
  /** /metrics and /healthz; null = none. Default: port + 1 (0 when port is 0). */
  metricsPort?: number | null;
  /** Bearer token trainers must send; required beyond loopback. */
  token?: string | null;
  /** TLS of the trainer service (certificate and key, CA for mutual TLS); required beyond loopback unless `insecure`. */
  tls?: TlsFiles;
  dataDir: string;
  estimator?: CoreEstimator;
  normalize?: NormalizeBy;
  lossAgg?: LossAggMode;
  tokenBudget?: number;
  batchTimeoutMs?: number;
  /** Group size when a rollout's metadata declares none; 0 = wait for the timeout. */
  groupSize?: number;
  groupTimeoutMs?: number;
  trainFlagged?: boolean;
  /**
   * Segment kinds trained (e.g. main, sub_agent, compaction), for rollouts whose metadata has no `train_segments`;
   * unset: the gateway's choice (its --train-segments). Gateways deliver every segment's loss mask.
   */
  trainSegments?: readonly string[];
  maxMessageBytes?: number;
  processMetrics?: boolean;
  log?: (line: string) => void;
}

export interface Core {
  /** host:port of the trainer service. */
  address: string;
  port: number;
  metricsUrl: string | null;
  metrics: CoreMetrics;
  status(): CoreStatus;
  /** Packs whatever is ready into a batch now, full or not. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

/** Batches in the core's store, oldest first. */
class StoreBatchSource implements BatchSource {
  readonly #store: CoreStore;
  readonly #ids: number[];
  constructor(store: CoreStore) {
    this.#store = store;
    this.#ids = store.batchIds();
  }
  get size(): number {
    return this.#ids.length;
  }
  add(id: number): void {
    this.#ids.push(id);
  }
  next(exclude: ReadonlySet<number>): number | null {
    return this.#ids.find((id) => !exclude.has(id)) ?? null;
  }
  get(id: number): StoredBatch | undefined {
    return this.#store.getBatch(id);
  }
  async remove(ids: readonly number[]): Promise<number> {
    const removed = await this.#store.removeBatches(ids);
    for (const id of ids) {
      const at = this.#ids.indexOf(id);
      if (at >= 0) this.#ids.splice(at, 1);
    }
    return removed;
  }
}

function parseMetadata(json: string): Record<string, unknown> {
  try {
    const v = JSON.parse(json || "{}");
    return typeof v === "object" && v !== null ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function toPending(m: RolloutMessage, gateway: string, trainSegments?: readonly string[]): PendingRollout {
  const t = m.trajectories;
  const metadata = parseMetadata(m.metadataJson);
  return {
    rolloutId: m.rolloutId,
    groupKey: groupKeyOf(m.group, m.rolloutId),
    group: m.group,
    task: m.task,
    harness: m.harness,
    status: m.status,
    reward: m.hasReward ? m.reward : null,
    declaredSize: declaredGroupSize(metadata),
    flagged: m.flagged,
    flagReasons: m.flagReasons,
    oversize: m.oversize,
    rows: t.rows,
    offsets: t.offsets,
    tokenIds: t.tokenIds,
    lossMask: t.lossMask,
    logprobs: t.logprobs,
    trajectoryIds: m.trajectoryIds,
    segments: m.segments,
    trained: trainedRows(m, metadata, trainSegments),
    gateway,
    cursor: m.cursor,
    receivedAt: Date.now(),
  };
}

export async function startCore(options: CoreOptions): Promise<Core> {
  const host = options.host ?? "127.0.0.1";
  if (!isLoopbackHost(host) && !options.token) {
    throw new StartRefusal(`refusing to listen on ${host} without a token: trainers' gRPC would be open to the network (pass --token)`);
  }
  if (options.gateways.length === 0) throw new Error("at least one gateway address is needed (--gateway host:port)");
  const creds = serverCredentials(host, options.tls, "the trainer service");
  for (const address of options.gateways) channelCredentials(grpcTarget(address), options.gatewayTls); // bad TLS files fail here, before anything opens
  const log = options.log ?? (() => {});
  const estimator = options.estimator ?? "grpo";
  const store = new CoreStore(options.dataDir);
  const tracker = new GroupTracker({ defaultSize: options.groupSize ?? 0, timeoutMs: options.groupTimeoutMs ?? 120_000 });
  for (const p of store.allPending()) tracker.add(p);
  const packer = new BatchPacker(store, {
    tokenBudget: options.tokenBudget ?? DEFAULT_TOKEN_BUDGET,
    batchTimeoutMs: options.batchTimeoutMs ?? 5_000,
    normalize: options.normalize ?? "none",
    lossAgg: options.lossAgg ?? "token-mean",
    estimator,
  });
  const source = new StoreBatchSource(store);
  const consumers = new Map<string, TrajectoryConsumer>();
  const counts = { received: 0, duplicate: 0, groupsDone: 0 };
  const metrics = new CoreMetrics(
    {
      groupsPending: () => tracker.size,
      readyRows: () => packer.readyRows,
      batchesReady: () => source.size,
      gateways: () => [...consumers.values()].map((c) => [c.address, c.connected]),
    },
    options.processMetrics,
  );
  const trainer = new TrainerService({
    source,
    token: options.token ?? null,
    status: () => status(),
    onConsistency: (figures) => metrics.observeConsistency(figures),
    onAck: (n) => metrics.batchesAcked.inc(n),
    onServed: (batch) => metrics.tokensServed.inc(batch.tokens),
  });

  const status = (): CoreStatus => ({
    estimator,
    rolloutsReceived: counts.received,
    rolloutsDuplicate: counts.duplicate,
    groupsPending: tracker.size,
    groupsDone: counts.groupsDone,
    trajectoriesReady: packer.readyRows,
    batchesReady: source.size,
    batchesLeased: trainer.leased,
    gateways: [...consumers.keys()],
    gatewaysConnected: [...consumers.values()].map((c) => c.connected),
  });

  // Group processing and packing run one at a time, in arrival order.
  let chain: Promise<void> = Promise.resolve();
  const enqueue = (work: () => Promise<void>) => {
    chain = chain.then(work).catch((error) => log(`core: ${error instanceof Error ? error.stack ?? error.message : String(error)}`));
    return chain;
  };
  /** Groups taken from the tracker and being committed (their rollouts are still held, unacked). */
  const processing = new Map<string, PendingGroup>();

  const pack = async (flush = false) => {
    for (const batch of await packer.pack({ flush })) {
      source.add(batch.batchId);
      metrics.batches.inc();
    }
    trainer.notify();
  };

  const ackTo = (members: Iterable<{ gateway: string; cursor: number }>) => {
    const byGateway = new Map<string, number[]>();
    for (const { gateway, cursor } of members) byGateway.set(gateway, [...(byGateway.get(gateway) ?? []), cursor]);
    for (const [gateway, cursors] of byGateway) consumers.get(gateway)?.ack(cursors);
  };

  const processGroup = async (key: string, by: "size" | "timeout") => {
    const g = tracker.take(key);
    if (!g) return;
    processing.set(key, g);
    try {
      const ids = [...g.members.keys()];
      const rollouts = ids.map((id) => store.getPending(id)).filter((p): p is PendingRollout => p !== undefined);
      let rows: Awaited<ReturnType<typeof groupAdvantages>>["rows"] = [];
      try {
        const result = await groupAdvantages(rollouts, { estimator, trainFlagged: options.trainFlagged });
        for (const d of result.dropped) metrics.dropped.inc({ reason: d.reason });
        rows = result.rows;
      } catch (error) {
        // A group the estimator rejects is dropped whole (and said so) rather than blocking the stream.
        log(`core: group ${key} dropped: ${error instanceof Error ? error.message : String(error)}`);
        metrics.dropped.inc({ reason: "error" }, ids.length);
      }
      const keys = await store.commitGroup(key, ids, rows);
      packer.add(keys, rows.map((r) => r.tokenIds.byteLength / 4));
      counts.groupsDone++;
      metrics.groups.inc({ completed_by: by });
      ackTo(g.members.values());
    } finally {
      processing.delete(key);
    }
    await pack();
  };

  const onRollout = async (gateway: string, m: RolloutMessage) => {
    counts.received++;
    metrics.rollouts.inc({ status: m.status || "unknown" });
    if (store.isSeen(m.rolloutId)) {
      counts.duplicate++;
      metrics.duplicates.inc();
      consumers.get(gateway)?.ack([m.cursor]);
      return;
    }
    if (tracker.has(m.rolloutId)) {
      counts.duplicate++;
      metrics.duplicates.inc();
      tracker.resource(m.rolloutId, gateway, m.cursor);
      return;
    }
    const key = groupKeyOf(m.group, m.rolloutId);
    if (processing.has(key) || store.isGroupDone(key)) {
      metrics.dropped.inc({ reason: "late" });
      await store.markSeen([m.rolloutId]);
      consumers.get(gateway)?.ack([m.cursor]);
      return;
    }
    const pending = toPending(m, gateway, options.trainSegments);
    await store.putPending(pending);
    const g = tracker.add(pending);
    if (tracker.isComplete(g)) void enqueue(() => processGroup(key, "size"));
  };

  const server = new Server(serverOptions(options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES));
  server.addService(trainerService, trainer.handlers());
  const port = await bindServer(server, host, options.port ?? DEFAULT_CORE_PORT, creds);

  let http: HttpServer | null = null;
  let metricsUrl: string | null = null;
  const metricsPort = options.metricsPort === undefined ? (options.port === 0 ? 0 : port + 1) : options.metricsPort;
  if (metricsPort !== null) {
    http = createServer((req, res) => {
      if (req.url === "/metrics") {
        metrics.registry.metrics().then((body) => {
          res.writeHead(200, { "content-type": metrics.registry.contentType });
          res.end(body);
        });
      } else if (req.url === "/healthz") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ ok: true }));
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve, reject) => {
      http!.once("error", reject);
      http!.listen(metricsPort, host, () => resolve());
    });
    metricsUrl = `http://${dialAddress(host, (http.address() as AddressInfo).port)}/metrics`;
  }

  const member = options.member ?? store.memberName(() => `${hostname()}-${randomBytes(4).toString("hex")}`);
  for (const address of options.gateways.map(grpcTarget)) {
    if (consumers.has(address)) continue;
    const consumer = new TrajectoryConsumer({
      address,
      token: options.gatewayToken,
      tls: options.gatewayTls,
      consumerGroup: options.consumerGroup,
      member,
      maxInFlight: options.maxInFlight,
      leaseTimeoutMs: options.leaseTimeoutMs,
      maxMessageBytes: options.maxMessageBytes,
      onRollout: (m) => onRollout(address, m),
      held: () => [
        ...tracker.cursorsFrom(address),
        ...[...processing.values()].flatMap((g) => [...g.members.values()].filter((m) => m.gateway === address).map((m) => m.cursor)),
      ],
      onRejected: async (cursors) => {
        // Given to another core meanwhile (e.g. this one came back after its leases were re-delivered).
        const dropped = tracker.remove(address, new Set(cursors));
        await store.dropPending(dropped);
        if (dropped.length) log(`core: gateway ${address} gave ${dropped.length} rollouts held here to another core; dropped`);
      },
      onConnection: (up, detail) => log(`core: gateway ${address} ${up ? "connected" : "disconnected"} (${detail})`),
    });
    consumers.set(address, consumer);
  }
  // Groups completed before a restart, then the streams.
  void enqueue(async () => {
    for (const { key, by } of tracker.due(Date.now())) if (by === "size") await processGroup(key, by);
    await pack();
  });
  for (const c of consumers.values()) c.start();
  const timer = setInterval(() => {
    for (const { key, by } of tracker.due(Date.now())) void enqueue(() => processGroup(key, by));
    void enqueue(() => pack());
  }, 200);

  return {
    address: dialAddress(host, port),
    port,
    metricsUrl,
    metrics,
    status,
    flush: () => enqueue(() => pack(true)),
    async close() {
      clearInterval(timer);
      await Promise.all([...consumers.values()].map((c) => c.close()));
      await chain;
      trainer.notify();
      await shutdownServer(server, 1000);
      if (http) await new Promise<void>((resolve) => http!.close(() => resolve()));
      await store.close();
    },
  };
}
