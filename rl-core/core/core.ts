// The RL core: reads finished rollouts from one or more gateways' trajectory streams, groups them (groups.ts),
// computes advantages (rl-core/estimators on the native kernels), packs batches by a token budget, and serves them
// to trainers over gRPC. Everything it needs to resume is in its own store (core-store.ts); a rollout is acked to
// its gateway only once its group's rows are committed there, so a crash at any point loses nothing, and a rollout
// delivered again is recognised and skipped.
//
// `Core.start` opens its parts in order — store, trainer service, metrics server, gateway streams, timer — and
// `close` shuts them in reverse; a start that fails part-way closes what it had opened before throwing.
import { StartRefusal } from "../../util/refusal.ts";
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { Server } from "@grpc/grpc-js";
import { TrajectoryConsumer } from "../../clients/ts/trajectory-consumer.ts";
import type { NormalizeBy } from "../estimators/index.ts";
import type { KlKind, LossAggMode } from "../kernels/index.ts";
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
  coreSourcesService,
  LinkError,
  type AgreementMessage,
  type CoreStatus,
  type RolloutMessage,
  type SourceStatus,
  type TlsFiles,
} from "../../protocol/index.ts";
import { BatchPacker, type BatchUnit } from "./batch-packer.ts";
import { CoreStore, type PendingRollout } from "./core-store.ts";
import {
  estimatorSettingsProblem,
  type CoreEstimator,
  type Overlong,
  type Singleton,
  type WhitenScope,
} from "./estimator-settings.ts";
import { groupAdvantages } from "./group-advantages.ts";
import { DecisionPlan, readDecisions, type PlannedGroup } from "./decisions.ts";
import { declaredGroupSize, GroupTracker, type Assignment, type PendingGroup } from "./groups.ts";
import { CoreMetrics } from "./metrics.ts";
import { startMetricsServer, type MetricsServer } from "./metrics-server.ts";
import { parseMetadata, toPending } from "./rollout-intake.ts";
import { sourceHandlers, type SourceRequest } from "./source-service.ts";
import { StoreBatchSource } from "./store-batch-source.ts";
import type { BatchLayout } from "./tree-layout.ts";
import { TrainerService } from "./trainer-service.ts";
import { PolicyRelay } from "./policy-relay.ts";
import { callVersions, CurrentVersion } from "./policy-version.ts";
import type { StaleMode, StalenessRule } from "./staleness.ts";

export const DEFAULT_CORE_PORT = 8702;
export const DEFAULT_TOKEN_BUDGET = 65_536;
/**
 * Above the gateway's default rollout timeout (1 h, `serve --rollout-timeout`): every rollout of a group has ended by
 * then, so by default a group is processed whole, by its size, and never by the clock.
 */
export const DEFAULT_GROUP_TIMEOUT_MS = 70 * 60_000;

export interface CoreOptions {
  /** Gateways' gRPC addresses (host:port); none: the core waits for sources (AddSource, core.proto). */
  gateways: readonly string[];
  /** Bearer token for the gateways (their --token): their trajectory streams and control APIs. */
  gatewayToken?: string | null;
  /**
   * The gateways' control APIs (http://host:port) a trainer's PausePolicy / ResumePolicy is relayed to (each gateway
   * once; with `serve --workers`, any one worker relays it to the others).
   */
  gatewayApis?: readonly string[];
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
  /** What a batch never splits: a rollout's rows (default) or a group's. */
  batchUnit?: BatchUnit;
  /** The layout batches are served in unless a trainer's stream asks for another: rows (default) or tree. */
  layout?: BatchLayout;
  /** REINFORCE++ / REINFORCE++-baseline whitening: over the training batch (default, as the references) or the group. */
  whitenScope?: WhitenScope;
  /** REINFORCE++'s discount. Default 1. */
  gamma?: number;
  /**
   * A rollout's budget of trained tokens L: Dr.GRPO's constant for seq-mean-token-sum-norm (required by it) and
   * DAPO's L_max for overlong "penalty". 0: none.
   */
  maxLen?: number;
  /** Global token count the loss weights are normalised by; default the token budget; 0: per batch (sum 1). */
  lossTokens?: number;
  /** Drop groups whose rewards are all equal (no signal), counted as `zero_variance`. */
  dropZeroVarianceGroups?: boolean;
  /** A group of one kept rollout (outcome estimators): "zero" (default: advantage 0, no_signal) or "raw" (its reward, as verl). */
  singleton?: Singleton;
  /** Rollouts cut at the generation limit (finish_reason length): "off" (default), "drop", "mask" or "penalty". */
  overlong?: Overlong;
  /** DAPO's L_cache for overlong "penalty" (tokens before maxLen where the length penalty ramps to −1). */
  overlongBuffer?: number;
  /** KL in the reward of served batches: β; the reply to a ref report carries the advantages with −β·KL. Default 0. */
  klCoef?: number;
  /** The KL estimator of klCoef (verl's kl_penalty): k1 (default), k2 or k3. */
  klEstimator?: KlKind;
  /** Group size when a rollout's metadata declares none; 0 = wait for the timeout. */
  groupSize?: number;
  groupTimeoutMs?: number;
  trainFlagged?: boolean;
  /**
   * Trained tokens sampled by a version older than current − maxStaleness are stale (staleness.ts); undefined or
   * null: none is judged.
   */
  maxStaleness?: number | null;
  /** What is done with stale tokens: keep (default: trained, counted), mask (out of the loss) or drop (the rollout). */
  stale?: StaleMode;
  /**
   * Segment kinds trained (e.g. main, sub_agent, compaction), for rollouts whose metadata has no `train_segments`;
   * unset: the gateway's choice (its --train-segments). Gateways deliver every segment's loss mask.
   */
  trainSegments?: readonly string[];
  /**
   * Follow the decisions another core recorded (its --data directory, or a JSON-lines export): the same groups and
   * batch cuts, whatever the timing — a replay of its rollouts serves bit-equal batches (decisions.ts).
   */
  followDecisions?: string;
  maxMessageBytes?: number;
  processMetrics?: boolean;
  log?: (line: string) => void;
}

function message(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}

export class Core {
  /** host:port of the trainer service. */
  readonly address: string;
  readonly port: number;
  readonly metrics: CoreMetrics;

  readonly #options: CoreOptions;
  readonly #log: (line: string) => void;
  readonly #store: CoreStore;
  readonly #tracker: GroupTracker;
  readonly #packer: BatchPacker;
  readonly #source: StoreBatchSource;
  readonly #trainer: TrainerService;
  readonly #server: Server;
  #httpServer: MetricsServer | null = null;
  readonly #consumers = new Map<string, TrajectoryConsumer>();
  /** Streams added while running (core.proto AddSource), by address: also in #consumers. */
  readonly #sources = new Map<string, SourceRequest & { expiresAt: number; received: number }>();
  #member = "";
  readonly #counts = {
    received: 0,
    duplicate: 0,
    groupsDone: 0,
    late: 0,
    dropped: {} as Record<string, number>,
    staleKept: 0,
    staleMasked: 0,
  };
  /** The current policy version (a trainer's last resume, else rollouts' newest): what staleness counts from. */
  readonly #version: CurrentVersion;
  /** A trainer's PausePolicy / ResumePolicy, relayed to the gateways' control API. */
  readonly #policy: PolicyRelay;
  /** Groups taken from the tracker and being committed (their rollouts are still held, unacked). */
  readonly #processing = new Map<string, PendingGroup>();
  /** Received rollouts being written to the store: a group is processed only once its members' writes are done. */
  readonly #intake = new Set<Promise<void>>();
  readonly #plan: DecisionPlan | null;
  #chain: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | null = null;
  #closed = false;

  /** Starts a core; on failure, whatever it had opened is closed again and the error thrown. */
  static async start(options: CoreOptions): Promise<Core> {
    const host = options.host ?? "127.0.0.1";
    const settingsProblem = estimatorSettingsProblem({ ...options, estimator: options.estimator ?? "grpo" });
    if (settingsProblem) throw new StartRefusal(settingsProblem);
    if (!isLoopbackHost(host) && !options.token) {
      throw new StartRefusal(
        `refusing to listen on ${host} without a token: trainers' gRPC would be open to the network (pass --token)`,
      );
    }
    for (const api of options.gatewayApis ?? []) {
      if (!/^https?:\/\/[^/]/.test(api))
        throw new StartRefusal(`--gateway-api ${api}: a gateway's control API is an http:// or https:// URL`);
    }
    const creds = serverCredentials(host, options.tls, "the trainer service");
    for (const address of options.gateways) channelCredentials(grpcTarget(address), options.gatewayTls); // bad TLS files fail here, before anything opens
    const opened: Array<() => Promise<void>> = [];
    try {
      const store = new CoreStore(options.dataDir);
      opened.push(() => store.close());
      const server = new Server(serverOptions(options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES));
      opened.push(() => shutdownServer(server, 1000));
      const port = await bindServer(server, host, options.port ?? DEFAULT_CORE_PORT, creds);
      const metricsPort = options.metricsPort === undefined ? (options.port === 0 ? 0 : port + 1) : options.metricsPort;
      const core = new Core(options, store, server, port, host);
      opened.push(() => core.#stopParts());
      await core.#open(metricsPort);
      return core;
    } catch (error) {
      for (const close of opened.reverse()) await close().catch(() => {});
      throw error;
    }
  }

  private constructor(options: CoreOptions, store: CoreStore, server: Server, port: number, host: string) {
    this.#options = options;
    this.#log = options.log ?? (() => {});
    this.#store = store;
    this.#server = server;
    this.port = port;
    this.address = dialAddress(host, port);
    this.#plan = options.followDecisions ? new DecisionPlan(readDecisions(options.followDecisions)) : null;
    this.#version = new CurrentVersion(store.policyVersion(), {
      save: (v) => store.setPolicyVersion(v),
      onLowered: (from, to) => {
        this.metrics.versionLowered.inc();
        this.#log(`core: a trainer's resume lowered the current policy version from ${from} to ${to}`);
      },
    });
    this.#policy = new PolicyRelay({
      gatewayApis: options.gatewayApis ?? [],
      token: options.gatewayToken ?? null,
      current: this.#version,
    });
    this.#tracker = new GroupTracker({
      defaultSize: options.groupSize ?? 0,
      timeoutMs: options.groupTimeoutMs ?? DEFAULT_GROUP_TIMEOUT_MS,
      names: store.allNames(),
      generations: store.allGenerations(),
    });
    for (const p of store.allPending()) this.#tracker.add(p, this.#plan?.groupOf(p.rolloutId) !== undefined);
    const tokenBudget = options.tokenBudget ?? DEFAULT_TOKEN_BUDGET;
    this.#packer = new BatchPacker(
      store,
      {
        tokenBudget,
        batchTimeoutMs: options.batchTimeoutMs ?? 5_000,
        normalize: options.normalize ?? "none",
        lossAgg: options.lossAgg ?? "token-mean",
        estimator: this.estimator,
        batchUnit: options.batchUnit ?? "rollout",
        whitenScope: options.whitenScope ?? "batch",
        maxLen: options.maxLen ?? 0,
        lossTokens: options.lossTokens ?? tokenBudget,
        currentVersion: () => this.#version.version,
      },
      this.#plan,
    );
    this.#source = new StoreBatchSource(store);
    this.metrics = new CoreMetrics(
      {
        groupsPending: () => this.#tracker.size,
        readyRows: () => this.#packer.readyRows,
        batchesReady: () => this.#source.size,
        gateways: () => [...this.#consumers.values()].map((c) => [c.address, c.connected]),
      },
      options.processMetrics,
    );
    this.#trainer = new TrainerService({
      source: this.#source,
      token: options.token ?? null,
      status: () => this.status(),
      onConsistency: (figures, batchId) => {
        this.metrics.observeConsistency(figures);
        this.#reportAgreement({ atMs: Date.now(), batchId, member: this.#member, harnesses: figures });
      },
      onAck: (n) => this.metrics.batchesAcked.inc(n),
      onServed: (batch) => this.metrics.tokensServed.inc(batch.tokens),
      whitenScope: options.whitenScope ?? "batch",
      singleton: options.singleton ?? "zero",
      layout: options.layout ?? "rows",
      policy: this.#policy,
      klReward: {
        klCoef: options.klCoef ?? 0,
        klKind: options.klEstimator ?? "k1",
        estimator: this.estimator,
        normalize: options.normalize ?? "none",
        gamma: options.gamma ?? 1,
      },
    });
    this.#server.addService(trainerService, this.#trainer.handlers());
    this.#server.addService(coreSourcesService, sourceHandlers(this, options.token ?? null));
  }

  /** The recorded decisions this core follows (--follow-decisions); null when it decides itself. */
  get plan(): DecisionPlan | null {
    return this.#plan;
  }

  /** The /metrics URL; null without a metrics server. */
  get metricsUrl(): string | null {
    return this.#httpServer?.url ?? null;
  }

  get estimator(): CoreEstimator {
    return this.#options.estimator ?? "grpo";
  }

  /** The metrics server, the gateway streams and the timer (the store and trainer service are open already). */
  async #open(metricsPort: number | null): Promise<void> {
    if (metricsPort !== null)
      this.#httpServer = await startMetricsServer(this.metrics, this.#options.host ?? "127.0.0.1", metricsPort);
    const options = this.#options;
    const member = options.member ?? this.#store.memberName(() => `${hostname()}-${randomBytes(4).toString("hex")}`);
    this.#member = member;
    for (const address of options.gateways.map(grpcTarget)) {
      if (this.#consumers.has(address)) continue;
      this.#consumers.set(address, this.#consumer(address, { consumerGroup: options.consumerGroup }));
    }
    // Groups completed before a restart, then the streams.
    void this.#enqueue(async () => {
      for (const { key, by } of this.#tracker.due(Date.now())) if (by === "size") await this.#processGroup(key, by);
      await this.#pack();
    });
    for (const c of this.#consumers.values()) c.start();
    this.#timer = setInterval(() => {
      const now = Date.now();
      for (const [address, source] of this.#sources) {
        if (source.expiresAt > now) continue;
        this.#log(`core: source ${address} was not renewed within ${source.ttlMs} ms; dropped`);
        void this.removeSource(address);
      }
      for (const { key, by } of this.#tracker.due(Date.now())) void this.#enqueue(() => this.#processGroup(key, by));
      void this.#enqueue(() => this.#pack());
    }, 200);
  }

  #consumer(address: string, how: { consumerGroup?: string; token?: string | null }): TrajectoryConsumer {
    const options = this.#options;
    let connected: boolean | null = null;
    return new TrajectoryConsumer({
      address,
      token: how.token === undefined ? options.gatewayToken : how.token,
      tls: options.gatewayTls,
      consumerGroup: how.consumerGroup,
      member: this.#member,
      maxInFlight: options.maxInFlight,
      leaseTimeoutMs: options.leaseTimeoutMs,
      maxMessageBytes: options.maxMessageBytes,
      onRollout: (m) => this.#onRollout(address, m),
      held: () => [
        ...this.#tracker.cursorsFrom(address),
        ...[...this.#processing.values()].flatMap((g) =>
          [...g.members.values()].filter((m) => m.gateway === address).map((m) => m.cursor),
        ),
      ],
      onRejected: async (cursors) => {
        // Given to another core meanwhile (e.g. this one came back after its leases were re-delivered): reported.
        const dropped = this.#tracker.remove(address, new Set(cursors));
        await this.#store.dropPending(dropped);
        this.#drop("rejected", dropped.length);
        if (dropped.length)
          this.#log(`core: gateway ${address} gave ${dropped.length} rollouts held here to another core; dropped`);
      },
      onConnection: (up, detail) => {
        // Each failed reconnect (every 2 s at most, backing off) would be a line forever: only changes are logged.
        if (up === connected) return;
        connected = up;
        this.#log(
          up
            ? `core: gateway ${address} connected (${detail})`
            : `core: gateway ${address} disconnected (${detail}); reconnecting with backoff, logged when it is back`,
        );
      },
    });
  }

  /**
   * Reads another trajectory stream until it is not renewed within its ttl (AddSource, core.proto). Its rollout ids
   * and group names take the namespace as a prefix (`<namespace>/<id>`), so they neither collide with a gateway's
   * rollouts of the same ids (skipped as duplicates otherwise) nor join their groups. Calling it again renews it.
   */
  addSource(request: SourceRequest): SourceStatus {
    if (this.#closed) throw new LinkError("RLGATE_UNAVAILABLE", "the core is shutting down");
    const address = grpcTarget(request.address);
    const existing = this.#sources.get(address);
    if (!existing && this.#consumers.has(address))
      throw new LinkError("RLGATE_BAD_REQUEST", `${address} is one of this core's gateways (--gateway) already`);
    if (existing && (existing.namespace !== request.namespace || existing.consumerGroup !== request.consumerGroup))
      throw new LinkError(
        "RLGATE_BAD_REQUEST",
        `${address} is read already, as consumer group '${existing.consumerGroup}' in namespace '${existing.namespace}'`,
      );
    const expiresAt = Date.now() + request.ttlMs;
    if (existing) {
      Object.assign(existing, { expiresAt, ttlMs: request.ttlMs });
      return this.#sourceStatus(address, false);
    }
    const consumer = this.#consumer(address, { consumerGroup: request.consumerGroup, token: request.token });
    this.#sources.set(address, { ...request, address, expiresAt, received: 0 });
    this.#consumers.set(address, consumer);
    consumer.start();
    this.#log(
      `core: reading ${address} as consumer group '${request.consumerGroup}'` +
        (request.namespace ? `, rollout ids and groups prefixed '${request.namespace}/'` : ""),
    );
    return this.#sourceStatus(address, true);
  }

  /** Stops reading a source; what it delivered stays (unacked rollouts come again if it is added again). */
  async removeSource(address: string): Promise<SourceStatus> {
    address = grpcTarget(address);
    const source = this.#sources.get(address);
    if (!source) return { ...this.#sourceStatus(address, false), removed: false };
    const status = { ...this.#sourceStatus(address, false), removed: true };
    this.#sources.delete(address);
    const consumer = this.#consumers.get(address);
    this.#consumers.delete(address);
    await consumer?.close();
    return status;
  }

  #sourceStatus(address: string, added: boolean): SourceStatus {
    const source = this.#sources.get(address);
    return {
      address,
      consumerGroup: source?.consumerGroup ?? "",
      namespace: source?.namespace ?? "",
      added,
      connected: this.#consumers.get(address)?.connected ?? false,
      received: source?.received ?? 0,
      removed: false,
    };
  }

  /** A trainer's figures go to every stream this core reads (each gateway's UI charts them). */
  #reportAgreement(agreement: AgreementMessage): void {
    for (const consumer of this.#consumers.values()) consumer.report(agreement);
  }

  #drop(reason: string, n = 1): void {
    if (n <= 0) return;
    this.metrics.dropped.inc({ reason }, n);
    this.#counts.dropped[reason] = (this.#counts.dropped[reason] ?? 0) + n;
  }

  status(): CoreStatus {
    return {
      estimator: this.estimator,
      rolloutsReceived: this.#counts.received,
      rolloutsDuplicate: this.#counts.duplicate,
      groupsPending: this.#tracker.size,
      groupsDone: this.#counts.groupsDone,
      trajectoriesReady: this.#packer.readyRows,
      batchesReady: this.#source.size,
      batchesLeased: this.#trainer.leased,
      gateways: [...this.#consumers.keys()],
      gatewaysConnected: [...this.#consumers.values()].map((c) => c.connected),
      rolloutsLate: this.#counts.late,
      rolloutsDropped: { ...this.#counts.dropped },
      batchUnit: this.#options.batchUnit ?? "rollout",
      whitenScope: this.#options.whitenScope ?? "batch",
      currentVersion: this.#version.version,
      maxStaleness: this.#options.maxStaleness ?? -1,
      stale: this.#options.stale ?? "keep",
      staleTokensKept: this.#counts.staleKept,
      staleTokensMasked: this.#counts.staleMasked,
    };
  }

  /** The policy version staleness counts from now (policy-version.ts). */
  get currentVersion(): string {
    return this.#version.version;
  }

  /** The staleness rule a group processed now is judged by; null without --max-staleness. */
  #stalenessRule(): StalenessRule | null {
    const k = this.#options.maxStaleness;
    if (k === undefined || k === null) return null;
    return { maxStaleness: k, mode: this.#options.stale ?? "keep", current: this.#version.number };
  }

  /** Packs whatever is ready into a batch now, full or not. */
  flush(): Promise<void> {
    return this.#enqueue(() => this.#pack(true));
  }

  // Group processing and packing run one at a time, in arrival order.
  #enqueue(work: () => Promise<void>): Promise<void> {
    this.#chain = this.#chain.then(work).catch((error) => this.#log(`core: ${message(error)}`));
    return this.#chain;
  }

  async #pack(flush = false): Promise<void> {
    for (const batch of await this.#packer.pack({ flush })) {
      this.#source.add(batch.batchId);
      this.metrics.batches.inc();
    }
    this.#trainer.notify();
  }

  #ackTo(members: Iterable<{ gateway: string; cursor: number }>): void {
    const byGateway = new Map<string, number[]>();
    for (const { gateway, cursor } of members) byGateway.set(gateway, [...(byGateway.get(gateway) ?? []), cursor]);
    for (const [gateway, cursors] of byGateway) this.#consumers.get(gateway)?.ack(cursors);
  }

  async #processGroup(key: string, by: "size" | "timeout"): Promise<void> {
    // Its members' intake writes first (a member added to the group is in the store before the group is read).
    while (this.#intake.size) await Promise.all(this.#intake);
    const g = this.#tracker.take(key);
    if (!g) return;
    this.#processing.set(key, g);
    try {
      // One order however the rollouts arrived (a restart reloads them by id): float sums are bit-equal on replay.
      const ids = [...g.members.keys()].sort();
      const rollouts = ids.map((id) => this.#store.getPending(id)).filter((p): p is PendingRollout => p !== undefined);
      let rows: Awaited<ReturnType<typeof groupAdvantages>>["rows"] = [];
      try {
        const result = await groupAdvantages(rollouts, {
          estimator: this.estimator,
          trainFlagged: this.#options.trainFlagged,
          dropZeroVariance: this.#options.dropZeroVarianceGroups,
          whitenScope: this.#options.whitenScope ?? "batch",
          gamma: this.#options.gamma,
          singleton: this.#options.singleton,
          overlong: this.#options.overlong,
          overlongBuffer: this.#options.overlongBuffer,
          maxLen: this.#options.maxLen,
          staleness: this.#stalenessRule(),
        });
        for (const d of result.dropped) this.#drop(d.reason);
        rows = result.rows;
        this.#countStale(rows, result.staleMasked);
      } catch (error) {
        // A group the estimator rejects is dropped whole (and said so) rather than blocking the stream.
        this.#log(`core: group ${key} dropped: ${error instanceof Error ? error.message : String(error)}`);
        this.#drop("error", ids.length);
      }
      if (by === "timeout" && g.size > g.members.size) {
        this.#log(
          `core: group ${key} processed at its timeout with ${g.members.size} of ${g.size} rollouts; the other ${g.size - g.members.size} of its generation are trained as its late ones`,
        );
      }
      const planned = this.#plan?.groupOf(ids[0] ?? "")?.key === key;
      const keys = await this.#store.commitGroup(key, ids, rows, this.#tracker.states(g.name, key), {
        kind: "group",
        key,
        members: ids,
        by: planned ? "plan" : by,
        at: Date.now(),
      });
      this.#packer.add(
        keys,
        rows.map((r) => ({ tokens: r.tokenIds.byteLength / 4, rolloutId: r.rolloutId, groupKey: r.groupKey })),
      );
      this.#counts.groupsDone++;
      this.metrics.groups.inc({ completed_by: by });
      this.#ackTo(g.members.values());
    } finally {
      this.#processing.delete(key);
    }
    await this.#pack();
  }

  #countStale(rows: ReadonlyArray<{ staleTokens?: number }>, masked: number): void {
    const kept = rows.reduce((n, r) => n + (r.staleTokens ?? 0), 0);
    this.#counts.staleKept += kept;
    this.#counts.staleMasked += masked;
    if (kept) this.metrics.staleTokens.inc({ action: "kept" }, kept);
    if (masked) this.metrics.staleTokens.inc({ action: "masked" }, masked);
  }

  /** The group a new rollout joins: the recorded one when following decisions, else by the membership rule. */
  #assign(m: RolloutMessage, planned: PlannedGroup | undefined): Assignment {
    if (planned) return { ...planned, size: planned.members.length, overSize: false };
    const declared = declaredGroupSize(parseMetadata(m.metadataJson));
    return this.#tracker.assign(m.group, m.rolloutId, declared, m.round ?? 0);
  }

  async #onRollout(gateway: string, m: RolloutMessage): Promise<void> {
    const source = this.#sources.get(gateway);
    if (source) {
      source.received++;
      if (source.namespace) {
        const ns = source.namespace;
        m = { ...m, rolloutId: `${ns}/${m.rolloutId}`, group: m.group ? `${ns}/${m.group}` : "" };
      }
    }
    this.#counts.received++;
    this.metrics.rollouts.inc({ status: m.status || "unknown" });
    this.#version.observe(callVersions(m.calls));
    if (this.#store.isSeen(m.rolloutId)) {
      this.#counts.duplicate++;
      this.metrics.duplicates.inc();
      this.#consumers.get(gateway)?.ack([m.cursor]);
      return;
    }
    if (this.#tracker.has(m.rolloutId)) {
      this.#counts.duplicate++;
      this.metrics.duplicates.inc();
      this.#tracker.resource(m.rolloutId, gateway, m.cursor);
      return;
    }
    // Decided here, in stream order, and joined to its group before anything awaits: membership never depends on
    // when a group is taken.
    const planned = this.#plan?.groupOf(m.rolloutId);
    const assignment = this.#assign(m, planned);
    if (assignment.overSize) {
      this.#log(
        `core: rollout ${m.rolloutId} dropped: round ${assignment.round} of '${m.group}' holds its size already`,
      );
      this.#drop("over_size");
      await this.#store.markSeen([m.rolloutId]);
      this.#consumers.get(gateway)?.ack([m.cursor]);
      return;
    }
    if (assignment.late) {
      this.#counts.late++;
      this.metrics.late.inc();
    }
    const pending = toPending(m, gateway, assignment, this.#options.trainSegments);
    const g = this.#tracker.add(pending, planned !== undefined);
    const write = this.#store.putPending(pending, this.#tracker.states(m.group, assignment.key));
    this.#intake.add(write);
    try {
      await write;
    } finally {
      this.#intake.delete(write);
    }
    if (this.#tracker.isComplete(g)) void this.#enqueue(() => this.#processGroup(g.key, "size"));
  }

  /** Timer, streams, pending work, trainer service, metrics server — in that order. */
  async #stopParts(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#sources.clear();
    await Promise.all([...this.#consumers.values()].map((c) => c.close()));
    await this.#chain;
    this.#trainer.notify();
    if (this.#httpServer) await this.#httpServer.close();
    this.#httpServer = null;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#stopParts();
    await shutdownServer(this.#server, 1000);
    // A resume still relayed sets the current version once the gateways answered: it is kept before the store closes.
    await this.#policy.idle();
    await this.#version.saved();
    await this.#store.close();
  }
}

export function startCore(options: CoreOptions): Promise<Core> {
  return Core.start(options);
}
