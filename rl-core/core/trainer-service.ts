// The Trainer service (proto/rlgate/v1/trainer.proto): batches streamed to trainers at least once (a batch is
// leased to one stream until acked, and re-delivered if that stream ends first), logprob reports turned into
// consistency figures, and advantages computed for trainers that bring their own values. With the core's
// --kl-coef, a ref report's reply carries the batch's advantages with KL in the reward (servedAdvantages, the same
// computation as ComputeAdvantages with kl_coef).
import type { sendUnaryData, ServerUnaryCall, ServerWritableStream } from "@grpc/grpc-js";
import {
  computeAdvantagesAsync,
  type EstimatorSpec,
  type NormalizeBy,
  type RolloutBatch,
} from "../estimators/index.ts";
import {
  importanceWeightsAsync,
  klDivergenceAsync,
  maskedWhitenAsync,
  KL_KINDS,
  type KlKind,
} from "../kernels/index.ts";
import {
  bytesOf,
  checkOffsets,
  checkToken,
  errorToStatus,
  float32s,
  int32s,
  isOpen,
  LinkError,
  send,
  uint8s,
  type AckBatchRequest,
  type AdvantageRequest,
  type AdvantageResponse,
  type BatchMessage,
  type Consistency,
  type ConsistencyReport,
  type CoreStatus,
  type LogprobReport,
  type PausePolicyRequest,
  type PolicyState,
  type ResumePolicyRequest,
  type RowKl,
  type StreamBatchesRequest,
} from "../../protocol/index.ts";
import { batchLevelAdvantages, indexStrings } from "./batch-advantages.ts";
import { consistencyFigures } from "./consistency.ts";
import type { StoredBatch } from "./core-store.ts";
import { OUTCOME_ESTIMATORS, type OutcomeEstimator, type Singleton, type WhitenScope } from "./estimator-settings.ts";
import { rolloutValues } from "./group-advantages.ts";
import type { PolicyRelay } from "./policy-relay.ts";
import {
  BATCH_LAYOUTS,
  batchTreeView,
  rowsToTree,
  treeBatch,
  treeToRows,
  type BatchLayout,
  type TreeView,
} from "./tree-layout.ts";

export const DEFAULT_TRAINER_IN_FLIGHT = 2;
const EMPTY = Buffer.alloc(0);

/** Where batches come from: the core's store, or a synthetic source (bench). */
export interface BatchSource {
  /** The oldest batch id not in `exclude`, or null. */
  next(exclude: ReadonlySet<number>): number | null;
  get(id: number): StoredBatch | undefined;
  remove(ids: readonly number[]): Promise<number>;
  readonly size: number;
}

export interface TrainerServiceOptions {
  source: BatchSource;
  token: string | null;
  status(): CoreStatus;
  onConsistency?(figures: Consistency[], batchId: number): void;
  onAck?(count: number): void;
  onServed?(batch: StoredBatch): void;
  /** The core's whitening scope (REINFORCE++, REINFORCE++-baseline), for advantages on request. Default batch. */
  whitenScope?: WhitenScope;
  /** The core's singleton rule (group-advantages.ts), for advantages on request. Default zero. */
  singleton?: Singleton;
  /**
   * KL in the reward of served batches (the core's --kl-coef > 0): the reply to a ref report carries the batch's
   * advantages recomputed by the core's estimator and settings with −klCoef · KL(policy ‖ ref) in the reward.
   */
  klReward?: { klCoef: number; klKind: KlKind; estimator: string; normalize: NormalizeBy; gamma: number };
  /** The layout batches are served in unless a stream asks for another (tree-layout.ts). Default rows. */
  layout?: BatchLayout;
  /** Weight updates a trainer asks for (PausePolicy, ResumePolicy), relayed to the gateways (the core's; none: refused). */
  policy?: PolicyRelay;
}

function layoutOf(asked: string | undefined, fallback: BatchLayout): BatchLayout {
  const layout = (asked || fallback) as BatchLayout;
  if (!BATCH_LAYOUTS.includes(layout))
    throw new LinkError("RLGATE_BAD_REQUEST", `layout must be one of ${BATCH_LAYOUTS.join(", ")}, not '${asked}'`);
  return layout;
}

/** Per-row means of a KL estimator over the row's trained tokens. */
async function rowKl(batch: StoredBatch, policy: Float32Array, ref: Float32Array): Promise<RowKl[]> {
  const offsets = int32s(batch.offsets);
  const mask = uint8s(batch.lossMask);
  const byKind = await Promise.all(
    KL_KINDS.map((kind) => klDivergenceAsync({ logp: policy, logpRef: ref, mask, kind })),
  );
  const out: RowKl[] = [];
  for (let r = 0; r < batch.rows; r++) {
    const sums = [0, 0, 0];
    let tokens = 0;
    for (let t = offsets[r]!; t < offsets[r + 1]!; t++) {
      if (!mask[t]) continue;
      tokens++;
      for (let k = 0; k < 3; k++) sums[k] = sums[k]! + byKind[k]![t]!;
    }
    const mean = (k: number) => (tokens ? sums[k]! / tokens : 0);
    out.push({ row: r, tokens, k1: mean(0), k2: mean(1), k3: mean(2) });
  }
  return out;
}

/** A trainer's per-token logprobs for a batch: one per token, finite where the mask is 1. */
function trainerLogprobs(bytes: Uint8Array, batch: StoredBatch, what: string): Float32Array {
  const values = float32s(bytes, what);
  const mask = uint8s(batch.lossMask);
  if (values.length !== mask.length)
    throw new LinkError(
      "RLGATE_BAD_REQUEST",
      `${what} has ${values.length} entries, the batch has ${mask.length} tokens`,
    );
  for (let t = 0; t < mask.length; t++) {
    if (mask[t] && !Number.isFinite(values[t]!))
      throw new LinkError(
        "RLGATE_BAD_REQUEST",
        `${what}[${t}] is ${values[t]} on a trained token: logprobs must be finite`,
      );
  }
  return values;
}

/** A stored batch as trainers get it: each row's group key goes with it, its group's statistics stay in the core. */
export function batchMessage(b: StoredBatch): BatchMessage {
  return { ...b, rowInfo: b.rowInfo.map(({ signal: _s, context: _c, ...info }) => info) };
}

/** A unary handler: any error becomes its status (the token is checked by handlers()). */
function unaryHandler<Req, Res>(run: (request: Req) => Promise<Res>) {
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
    Promise.resolve()
      .then(() => run(call.request))
      .then(
        (res) => callback(null, res),
        (error) => callback(errorToStatus(error)),
      );
  };
}

export class TrainerService {
  readonly #options: TrainerServiceOptions;
  /** batch id → stream holding it. */
  readonly #leases = new Map<number, number>();
  readonly #waiters = new Set<() => void>();
  /** Logprobs reported for unacked batches: the policy's and the reference policy's (for KL). */
  readonly #reported = new Map<number, { policy?: Float32Array; ref?: Float32Array }>();
  /** Tree views of unacked batches served or reported in the tree layout. */
  readonly #views = new Map<number, TreeView>();
  #streams = 0;

  constructor(options: TrainerServiceOptions) {
    this.#options = options;
  }

  get leased(): number {
    return this.#leases.size;
  }

  /** New batches, or leases given back: wakes waiting streams. */
  notify(): void {
    for (const w of [...this.#waiters]) w();
  }

  #wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waiters.add(done);
    });
  }

  readonly streamBatches = (call: ServerWritableStream<StreamBatchesRequest, BatchMessage>): void => {
    const stream = ++this.#streams;
    const mine = new Set<number>();
    let closed = false;
    const release = () => {
      if (closed) return;
      closed = true;
      for (const id of mine) if (this.#leases.get(id) === stream) this.#leases.delete(id);
      this.notify();
    };
    for (const event of ["cancelled", "close", "error", "finish"] as const) call.once(event, release);
    const run = async () => {
      checkToken(call.metadata, this.#options.token);
      const maxInFlight = call.request.maxInFlight > 0 ? call.request.maxInFlight : DEFAULT_TRAINER_IN_FLIGHT;
      const layout = layoutOf(call.request.layout, this.#options.layout ?? "rows");
      while (!closed && isOpen(call)) {
        for (const id of mine) if (this.#leases.get(id) !== stream) mine.delete(id); // acked
        const id = mine.size < maxInFlight ? this.#options.source.next(new Set(this.#leases.keys())) : null;
        const batch = id === null ? undefined : this.#options.source.get(id);
        if (id === null || !batch) {
          await this.#wait(1000);
          continue;
        }
        this.#leases.set(id, stream);
        mine.add(id);
        const message = batchMessage(batch);
        await send(call, layout === "tree" ? treeBatch(message, this.#view(batch)) : message);
        this.#options.onServed?.(batch);
      }
    };
    run().then(
      () => {
        release();
        if (isOpen(call)) call.end();
      },
      (error) => {
        release();
        if (isOpen(call)) call.emit("error", errorToStatus(error));
      },
    );
  };

  async #ack(ids: readonly number[]): Promise<number> {
    const removed = await this.#options.source.remove(ids);
    for (const id of ids) {
      this.#leases.delete(id);
      this.#reported.delete(id);
      this.#views.delete(id);
    }
    if (removed) this.#options.onAck?.(removed);
    this.notify();
    return removed;
  }

  #batch(id: number): StoredBatch {
    const batch = this.#options.source.get(id);
    if (!batch)
      throw new LinkError(
        "RLGATE_NOT_FOUND",
        `no batch ${id} (acked already? report logprobs before acking, or with ack: true)`,
      );
    return batch;
  }

  #view(batch: StoredBatch): TreeView {
    let view = this.#views.get(batch.batchId);
    if (!view) this.#views.set(batch.batchId, (view = batchTreeView(batchMessage(batch))));
    return view;
  }

  /**
   * A trainer's per-token array in the rows layout, and whether it came in the tree layout (told by its count: where
   * both layouts have as many tokens they are the same order, no node being shared).
   */
  #asRows(batch: StoredBatch, bytes: Uint8Array, what: string): { values: Float32Array; tree: TreeView | null } {
    const values = float32s(bytes, what);
    const rows = uint8s(batch.lossMask).length;
    if (values.length === rows || !values.length) return { values, tree: null };
    const view = this.#view(batch);
    if (values.length !== view.size)
      throw new LinkError(
        "RLGATE_BAD_REQUEST",
        `${what} has ${values.length} entries, the batch has ${rows} tokens (rows layout) or ${view.size} (tree layout)`,
      );
    return { values: treeToRows(view, values), tree: view };
  }

  readonly ackBatch = unaryHandler<AckBatchRequest, { acked: number }>(async (req) => ({
    acked: await this.#ack(req.batchIds),
  }));

  readonly reportLogprobs = unaryHandler<LogprobReport, ConsistencyReport>(async (req) => {
    const batch = this.#batch(req.batchId);
    const kind = req.kind || "policy";
    if (kind !== "policy" && kind !== "ref")
      throw new LinkError("RLGATE_BAD_REQUEST", `kind must be policy or ref, not '${kind}'`);
    const asRows = this.#asRows(batch, req.logprobs, "logprobs");
    const trainer = trainerLogprobs(bytesOf(asRows.values), batch, "logprobs");
    const inLayout = (x: Float32Array) => (asRows.tree ? rowsToTree(asRows.tree, x) : x);
    const rollout = float32s(batch.logprobs);
    const lossMask = uint8s(batch.lossMask);
    const reported = this.#reported.get(req.batchId) ?? {};
    reported[kind] = trainer;
    this.#reported.set(req.batchId, reported);
    let harnesses: Consistency[] = [];
    let importance: Uint8Array = EMPTY;
    if (kind === "policy") {
      harnesses = consistencyFigures({
        offsets: int32s(batch.offsets),
        lossMask,
        rollout,
        trainer,
        harness: batch.rowInfo.map((r) => r.harness),
      });
      this.#options.onConsistency?.(harnesses, req.batchId);
      if (req.importanceCap > 0) {
        importance = bytesOf(
          inLayout(
            await importanceWeightsAsync({
              logpOld: trainer,
              logpRollout: rollout,
              mask: lossMask,
              cap: req.importanceCap,
            }),
          ),
        );
      }
    }
    const kl = reported.ref ? await rowKl(batch, reported.policy ?? rollout, reported.ref) : [];
    // KL in the reward: the batch's advantages again, by the core's estimator and settings, with −β·KL per token in
    // the reward (every report once the ref logprobs are in, with the latest policy logprobs, as row_kl).
    const klReward = this.#options.klReward;
    let klAdvantages: Uint8Array = EMPTY;
    if (reported.ref && klReward && klReward.klCoef > 0) {
      const { advantages } = await servedAdvantages(
        batch,
        {
          estimator: klReward.estimator,
          normalize: klReward.normalize,
          whitenScope: this.#options.whitenScope ?? "batch",
          gamma: klReward.gamma,
          singleton: this.#options.singleton ?? "zero",
        },
        await this.#klTokenRewards(batch, klReward.klCoef, klReward.klKind),
      );
      klAdvantages = bytesOf(inLayout(advantages));
    }
    const acked = req.ack ? (await this.#ack([req.batchId])) > 0 : false;
    return { batchId: req.batchId, harnesses, importanceWeights: importance, acked, rowKl: kl, klAdvantages };
  });

  /** −coef · KL(policy ‖ ref) per token (0 on mask-0 tokens) of a batch whose ref logprobs were reported. */
  async #klTokenRewards(served: StoredBatch, coef: number, kind: KlKind): Promise<Float32Array> {
    const reported = this.#reported.get(served.batchId);
    if (!reported?.ref)
      throw new LinkError(
        "RLGATE_BAD_REQUEST",
        "kl_coef needs a served batch whose ref logprobs were reported (ReportLogprobs kind ref)",
      );
    const policy = reported.policy ?? float32s(served.logprobs);
    const kl = await klDivergenceAsync({ logp: policy, logpRef: reported.ref, mask: uint8s(served.lossMask), kind });
    return kl.map((x) => -coef * x);
  }

  /** −kl_coef · KL(policy ‖ ref) per token plus the request's token_rewards, when asked and the batch has ref logprobs. */
  async #requestTokenRewards(req: AdvantageRequest, served: StoredBatch | null): Promise<Float32Array | undefined> {
    const extra = req.tokenRewards.byteLength ? float32s(req.tokenRewards, "token_rewards") : undefined;
    const tokens = served ? uint8s(served.lossMask).length : uint8s(req.lossMask).length;
    if (extra && extra.length !== tokens) {
      throw new LinkError(
        "RLGATE_BAD_REQUEST",
        `token_rewards has ${extra.length} entries, the batch has ${tokens} tokens`,
      );
    }
    if (!(req.klCoef > 0)) return extra;
    if (!Number.isFinite(req.klCoef)) throw new LinkError("RLGATE_BAD_REQUEST", "kl_coef must be finite");
    const kind = (req.klKind || "k1") as KlKind;
    if (!KL_KINDS.includes(kind))
      throw new LinkError("RLGATE_BAD_REQUEST", `kl_kind must be one of ${KL_KINDS.join(", ")}`);
    if (!served)
      throw new LinkError(
        "RLGATE_BAD_REQUEST",
        "kl_coef needs a served batch whose ref logprobs were reported (ReportLogprobs kind ref)",
      );
    const kl = await this.#klTokenRewards(served, req.klCoef, kind);
    return extra ? kl.map((x, t) => x + extra[t]!) : kl;
  }

  readonly computeAdvantages = unaryHandler<AdvantageRequest, AdvantageResponse>(async (request) => {
    const served = request.batchId ? this.#batch(request.batchId) : null;
    if (!served || layoutOf(request.layout, this.#options.layout ?? "rows") === "rows")
      return this.#computeAdvantages(request, served);
    // The tree layout of a served batch: its per-token inputs taken to rows, the rows' advantages back to the tree.
    const view = this.#view(served);
    const rows = (bytes: Uint8Array, what: string) =>
      bytes.byteLength ? bytesOf(this.#asRows(served, bytes, what).values) : bytes;
    const req = {
      ...request,
      values: rows(request.values, "values"),
      tokenRewards: rows(request.tokenRewards, "token_rewards"),
    };
    const res = await this.#computeAdvantages(req, served);
    const tree = (bytes: Uint8Array) => (bytes.byteLength ? bytesOf(rowsToTree(view, float32s(bytes))) : bytes);
    return {
      advantages: tree(res.advantages),
      returns: tree(res.returns),
      lossMask: bytesOf(rowsToTree(view, uint8s(res.lossMask))),
    };
  });

  async #computeAdvantages(req: AdvantageRequest, served: StoredBatch | null): Promise<AdvantageResponse> {
    const batch = advantageBatch(req, served);
    const estimator = req.estimator || "gae";
    const normalize = (req.normalize || "none") as NormalizeBy;
    const scope = this.#options.whitenScope ?? "batch";
    if (estimator === "tree" || estimator === "branch-grpo") {
      throw new LinkError(
        "RLGATE_BAD_REQUEST",
        `the ${estimator} estimator runs in the core (--estimator ${estimator}), not on request`,
      );
    }
    const gamma = req.gamma ?? 1;
    // As GAE's gamma and the CLI's --gamma: a discount above 1 makes returns grow without bound along a row.
    if (estimator === "reinforce++" && !(gamma >= 0 && gamma <= 1))
      throw new LinkError("RLGATE_BAD_REQUEST", `gamma must be in [0, 1], not ${gamma}`);
    const tokenRewards = await this.#requestTokenRewards(req, served);
    if (served && (OUTCOME_ESTIMATORS.includes(estimator) || estimator === "reinforce++")) {
      // The rollout is the sample: each row's whole group (rollouts in other batches too) gives its baseline, and
      // the batch-level steps are the batch's own, so the core's settings reproduce the batch's advantages.
      const res = await servedAdvantages(
        served,
        { estimator, normalize, whitenScope: scope, gamma, singleton: this.#options.singleton ?? "zero" },
        tokenRewards,
      );
      return {
        advantages: bytesOf(res.advantages),
        returns: res.returns ? bytesOf(res.returns) : EMPTY,
        lossMask: served.lossMask,
      };
    }
    let spec: EstimatorSpec;
    if (estimator === "gae") {
      const values = float32s(req.values, "values");
      if (values.length !== batch.lossMask.length)
        throw new LinkError(
          "RLGATE_BAD_REQUEST",
          `values has ${values.length} entries, the batch has ${batch.lossMask.length} tokens`,
        );
      const gae = gaeParams(req);
      spec = { estimator: "gae", values, tokenRewards, ...gae, normalize };
    } else if (estimator === "reinforce++") {
      spec = { estimator, gamma, tokenRewards, normalize };
    } else {
      if (tokenRewards)
        throw new LinkError(
          "RLGATE_BAD_REQUEST",
          `token rewards and kl_coef with ${estimator} need a served batch (batch_id): the reward of a rollout takes its tokens' sum`,
        );
      spec = { estimator, normalize, singleton: this.#options.singleton ?? "zero" } as EstimatorSpec;
    }
    const res = await computeAdvantagesAsync(batch, spec);
    return {
      advantages: bytesOf(res.advantages),
      returns: res.returns ? bytesOf(res.returns) : EMPTY,
      lossMask: bytesOf(res.lossMask),
    };
  }

  readonly status = unaryHandler<unknown, CoreStatus>(async () => this.#options.status());

  readonly pausePolicy = unaryHandler<PausePolicyRequest, PolicyState>((req) => this.#policy().pause(req));

  readonly resumePolicy = unaryHandler<ResumePolicyRequest, PolicyState>((req) => this.#policy().resume(req));

  #policy(): PolicyRelay {
    if (!this.#options.policy)
      throw new LinkError("RLGATE_BAD_REQUEST", "this trainer service relays no weight updates");
    return this.#options.policy;
  }

  /** The gRPC implementation object (token checks included). */
  handlers() {
    const token = this.#options.token;
    const guard = <T extends (call: ServerUnaryCall<any, any>, cb: sendUnaryData<any>) => void>(handler: T) =>
      ((call, cb) => {
        try {
          checkToken(call.metadata, token);
        } catch (error) {
          return cb(errorToStatus(error));
        }
        handler(call, cb);
      }) as T;
    return {
      streamBatches: this.streamBatches,
      ackBatch: guard(this.ackBatch),
      reportLogprobs: guard(this.reportLogprobs),
      computeAdvantages: guard(this.computeAdvantages),
      status: guard(this.status),
      pausePolicy: guard(this.pausePolicy),
      resumePolicy: guard(this.resumePolicy),
    };
  }
}

/** GAE's parameters: absent, verl's defaults (gamma = lambda = 1, whitening); given, gamma and lambda both. */
function gaeParams(req: AdvantageRequest): { gamma: number; lambda: number; whiten: boolean } {
  const gae = req.gae;
  if (!gae) return { gamma: 1, lambda: 1, whiten: true };
  const missing = (["gamma", "lambda"] as const).filter((k) => gae[k] === undefined || gae[k] === null);
  if (missing.length)
    throw new LinkError(
      "RLGATE_BAD_REQUEST",
      `gae needs gamma and lambda together (missing ${missing.join(" and ")}); leave gae out for gamma = lambda = 1`,
    );
  for (const k of ["gamma", "lambda"] as const) {
    if (!Number.isFinite(gae[k]) || gae[k]! < 0 || gae[k]! > 1)
      throw new LinkError("RLGATE_BAD_REQUEST", `gae.${k} must be in [0, 1], not ${gae[k]}`);
  }
  return { gamma: gae.gamma!, lambda: gae.lambda!, whiten: gae.whiten ?? true };
}

/** The settings advantages over a served batch are computed with (the core's, or a request's). */
export interface ServedSpec {
  estimator: string;
  whitenScope: WhitenScope;
  normalize: NormalizeBy;
  /** reinforce++'s discount (default 1). */
  gamma?: number;
  singleton?: Singleton;
}

/**
 * Rows of `served` per group key, after checking that each group is whole in it: every rollout of its context with a
 * trained token has rows here. Needed where a group's figure takes every rollout's tokens (KL summed into an outcome
 * reward, REINFORCE++ whitened within the group), which exist only for the rollouts of this batch.
 */
function wholeGroups(served: StoredBatch, why: string): Map<string, number[]> {
  const here = new Set(served.rowInfo.map((r) => r.rolloutId));
  const rows = new Map<string, number[]>();
  served.rowInfo.forEach((r, i) => {
    let list = rows.get(r.groupKey);
    if (!list) {
      rows.set(r.groupKey, (list = []));
      r.context.rollouts.forEach((id, u) => {
        if (r.context.tokens[u]! > 0 && !here.has(id))
          throw new LinkError(
            "RLGATE_BAD_REQUEST",
            `${why} needs each group whole in the batch, but rollout ${id} of group '${r.group}' is in another batch (run the core with --batch-unit group)`,
          );
      });
    }
    list.push(i);
  });
  return rows;
}

/**
 * Advantages over a served batch, as the core computed them (group time, then batch level), by `spec` — optionally
 * with per-token rewards in the reward (−β·KL: verl's apply_kl_penalty, token_level_rewards = scores − β·kld):
 * - outcome estimators: one sample per rollout over each row's whole group (rollouts in other batches too); token
 *   rewards add their sum over the rollout's trained tokens to its reward (verl's outcome estimators take
 *   token_level_rewards.sum(-1)), which needs the group whole in the batch;
 * - reinforce++: the per-token return of the token rewards and the outcome reward at the row's last trained token,
 *   whitened within the group (scope group: the group whole in the batch) or over the batch.
 * Then the batch-level steps (batch-advantages.ts). Without token rewards and with the core's settings this is the
 * batch's own advantages.
 */
export async function servedAdvantages(
  served: StoredBatch,
  spec: ServedSpec,
  tokenRewards?: Float32Array,
): Promise<{ advantages: Float32Array; returns: Float32Array | null }> {
  const offsets = int32s(served.offsets);
  const mask = uint8s(served.lossMask);
  const level = { estimator: spec.estimator, whitenScope: spec.whitenScope, normalize: spec.normalize };
  if (spec.estimator === "reinforce++") {
    const layout: RolloutBatch = {
      offsets,
      lossMask: mask,
      rewards: Float64Array.from(served.rowInfo, (r) => r.reward),
    };
    const res = await computeAdvantagesAsync(layout, {
      estimator: "reinforce++",
      gamma: spec.gamma ?? 1,
      tokenRewards,
      whiten: false,
    });
    let advantages = res.advantages;
    if (spec.whitenScope === "group") {
      const groups = wholeGroups(served, "reinforce++ whitened within the group (--whiten-scope group)");
      advantages = await maskedWhitenAsync({
        offsets,
        x: advantages,
        mask,
        rowSegment: indexStrings(served.rowInfo.map((r) => r.groupKey)),
        numSegments: groups.size,
      });
    }
    return {
      advantages: await batchLevelAdvantages(offsets, mask, served.rowInfo, advantages, level),
      returns: res.returns,
    };
  }
  if (!OUTCOME_ESTIMATORS.includes(spec.estimator))
    throw new LinkError("RLGATE_BAD_REQUEST", `${spec.estimator} is not computed over a served batch here`);
  const shift = new Map<string, number>();
  if (tokenRewards) {
    wholeGroups(served, `KL (token rewards) in the reward of ${spec.estimator}`);
    served.rowInfo.forEach((r, i) => {
      let sum = shift.get(r.rolloutId) ?? 0;
      for (let t = offsets[i]!; t < offsets[i + 1]!; t++) if (mask[t]) sum += tokenRewards[t]!;
      shift.set(r.rolloutId, sum);
    });
  }
  const value = new Map<string, number>();
  const contexts = new Map(served.rowInfo.map((r) => [r.groupKey, r.context]));
  for (const ctx of contexts.values()) {
    const rewards = ctx.rewards.map((x, u) => x + (shift.get(ctx.rollouts[u]!) ?? 0));
    const values = await rolloutValues(
      spec.estimator as OutcomeEstimator,
      { ...ctx, rewards },
      spec.whitenScope,
      spec.singleton ?? "zero",
    );
    ctx.rollouts.forEach((id, u) => value.set(id, values[u]!));
  }
  const advantages = new Float32Array(mask.length);
  served.rowInfo.forEach((r, i) => {
    const v = value.get(r.rolloutId) ?? 0;
    for (let t = offsets[i]!; t < offsets[i + 1]!; t++) advantages[t] = mask[t] ? v : 0;
  });
  return { advantages: await batchLevelAdvantages(offsets, mask, served.rowInfo, advantages, level), returns: null };
}

/** Outcome advantages over a served batch, each row's group whole (see computeAdvantages). */
export async function servedOutcomeAdvantages(
  served: StoredBatch,
  estimator: OutcomeEstimator,
  scope: WhitenScope,
  normalize: NormalizeBy,
  singleton: Singleton = "zero",
): Promise<Float32Array> {
  return (await servedAdvantages(served, { estimator, whitenScope: scope, normalize, singleton })).advantages;
}

/** The RolloutBatch of an advantage request: a served batch's layout, or the request's own. */
function advantageBatch(req: AdvantageRequest, served: StoredBatch | null): RolloutBatch {
  if (served) {
    return {
      offsets: int32s(served.offsets),
      lossMask: uint8s(served.lossMask),
      rewards: Float64Array.from(served.rowInfo, (r) => r.reward),
      groupIds: indexStrings(served.rowInfo.map((r) => r.groupKey)),
      taskIds: indexStrings(served.rowInfo.map((r) => r.task)),
      harnessIds: indexStrings(served.rowInfo.map((r) => r.harness)),
    };
  }
  const offsets = int32s(req.offsets, "offsets");
  const lossMask = uint8s(req.lossMask);
  const rows = offsets.length - 1;
  const problem = rows < 0 ? "offsets must have rows + 1 entries" : checkOffsets(offsets, rows, lossMask.length);
  if (problem) throw new LinkError("RLGATE_BAD_REQUEST", problem);
  const perRow = (name: string, values: number[]) => {
    if (values.length === 0) return undefined;
    if (values.length !== rows)
      throw new LinkError("RLGATE_BAD_REQUEST", `${name} has ${values.length} entries for ${rows} rows`);
    return Int32Array.from(values);
  };
  if (req.rewards.length !== rows)
    throw new LinkError("RLGATE_BAD_REQUEST", `rewards has ${req.rewards.length} entries for ${rows} rows`);
  return {
    offsets,
    lossMask,
    rewards: Float64Array.from(req.rewards),
    groupIds: perRow("group_ids", req.groupIds),
    taskIds: perRow("task_ids", req.taskIds),
    harnessIds: perRow("harness_ids", req.harnessIds),
  };
}
