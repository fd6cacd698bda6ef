// Advantages on request (ComputeAdvantages): over a batch the trainer brings, or over a served batch (its layout,
// masks, rewards and groups; per-token inputs and replies in the layout asked for), with the trainer's values (GAE),
// token rewards, or KL in the reward from the batch's reported ref logprobs.
import {
  computeAdvantagesAsync,
  type EstimatorSpec,
  type NormalizeBy,
  type RolloutBatch,
} from "../estimators/index.ts";
import { KL_KINDS, type KlKind } from "../kernels/index.ts";
import {
  bytesOf,
  checkOffsets,
  float32s,
  int32s,
  LinkError,
  uint8s,
  type AdvantageRequest,
  type AdvantageResponse,
} from "../../protocol/index.ts";
import { indexStrings } from "./batch-advantages.ts";
import type { StoredBatch } from "./core-store.ts";
import { OUTCOME_ESTIMATORS, type Singleton, type WhitenScope } from "./estimator-settings.ts";
import type { LogprobReports } from "./logprob-reports.ts";
import { servedAdvantages } from "./served-advantages.ts";
import { layoutOf, type ServedBatches } from "./served-batches.ts";
import { rowsToTree, type BatchLayout } from "./tree-layout.ts";

const EMPTY = Buffer.alloc(0);

export interface AdvantageRequestsOptions {
  /** The layout of a served batch's per-token inputs and replies unless a request names one. */
  layout: BatchLayout;
  whitenScope?: WhitenScope;
  singleton?: Singleton;
}

export class AdvantageRequests {
  readonly #batches: ServedBatches;
  readonly #reports: LogprobReports;
  readonly #options: AdvantageRequestsOptions;

  constructor(batches: ServedBatches, reports: LogprobReports, options: AdvantageRequestsOptions) {
    this.#batches = batches;
    this.#reports = reports;
    this.#options = options;
  }

  async compute(request: AdvantageRequest): Promise<AdvantageResponse> {
    const served = request.batchId ? this.#batches.get(request.batchId) : null;
    if (!served || layoutOf(request.layout, this.#options.layout) === "rows")
      return this.#computeAdvantages(request, served);
    // The tree layout of a served batch: its per-token inputs taken to rows, the rows' advantages back to the tree.
    const view = this.#batches.view(served);
    const rows = (bytes: Uint8Array, what: string) =>
      bytes.byteLength ? bytesOf(this.#batches.asRows(served, bytes, what).values) : bytes;
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
    const kl = await this.#reports.klTokenRewards(served, req.klCoef, kind);
    return extra ? kl.map((x, t) => x + extra[t]!) : kl;
  }

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
