// The Trainer service (proto/rlgate/v1/trainer.proto), put together from its parts, one job each: batches streamed
// to trainers at least once (batch-leases.ts) out of the unacked batches the core keeps state for
// (served-batches.ts), logprob reports turned into consistency figures and KL (logprob-reports.ts), advantages
// computed for trainers that bring their own values (advantage-requests.ts, served-advantages.ts), and weight
// updates relayed to the gateways (policy-relay.ts). Every call but the stream checks the token here; the stream
// checks it as it starts.
import type { sendUnaryData, ServerUnaryCall } from "@grpc/grpc-js";
import { checkToken, errorToStatus, LinkError, type Consistency, type CoreStatus } from "../../protocol/index.ts";
import type { NormalizeBy } from "../estimators/index.ts";
import type { KlKind } from "../kernels/index.ts";
import { AdvantageRequests } from "./advantage-requests.ts";
import { BatchLeases } from "./batch-leases.ts";
import type { StoredBatch } from "./core-store.ts";
import type { Singleton, WhitenScope } from "./estimator-settings.ts";
import { LogprobReports } from "./logprob-reports.ts";
import type { PolicyRelay } from "./policy-relay.ts";
import { ServedBatches, type BatchSource } from "./served-batches.ts";
import type { BatchLayout } from "./tree-layout.ts";

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

export class TrainerService {
  readonly #options: TrainerServiceOptions;
  readonly #leases: BatchLeases;
  readonly #reports: LogprobReports;
  readonly #advantages: AdvantageRequests;

  constructor(options: TrainerServiceOptions) {
    this.#options = options;
    const batches = new ServedBatches(options.source);
    const layout = options.layout ?? "rows";
    this.#leases = new BatchLeases(batches, { ...options, layout });
    this.#reports = new LogprobReports(batches, this.#leases, options);
    this.#advantages = new AdvantageRequests(batches, this.#reports, { ...options, layout });
  }

  get leased(): number {
    return this.#leases.leased;
  }

  /** New batches, or leases given back: wakes waiting streams. */
  notify(): void {
    this.#leases.notify();
  }

  #policy(): PolicyRelay {
    if (!this.#options.policy)
      throw new LinkError("RLGATE_BAD_REQUEST", "this trainer service relays no weight updates");
    return this.#options.policy;
  }

  /** The gRPC implementation object. */
  handlers() {
    // A unary call: the token checked, then any error becomes its status.
    const unary =
      <Req, Res>(run: (request: Req) => Promise<Res>) =>
      (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
        Promise.resolve()
          .then(() => {
            checkToken(call.metadata, this.#options.token);
            return run(call.request);
          })
          .then(
            (res) => callback(null, res),
            (error) => callback(errorToStatus(error)),
          );
      };
    return {
      streamBatches: this.#leases.streamBatches,
      ackBatch: unary(async (req: { batchIds: number[] }) => ({ acked: await this.#leases.ack(req.batchIds) })),
      reportLogprobs: unary(this.#reports.report.bind(this.#reports)),
      computeAdvantages: unary(this.#advantages.compute.bind(this.#advantages)),
      status: unary(async () => this.#options.status()),
      pausePolicy: unary((req) => this.#policy().pause(req as never)),
      resumePolicy: unary((req) => this.#policy().resume(req as never)),
    };
  }
}
