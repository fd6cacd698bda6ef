// Rollouts always end: a rollout still open at its deadline (its `deadline_s`, else `serve --rollout-timeout`) is
// finished by the gateway as `timeout`, without a reward, so a harness that died never holds its RL group's slot.
//
// Every gateway process sweeps (each worker of `serve --workers N`, or the one process): the finish goes through the
// store's idempotent `finishOpenRollout`, which checks the rollout is open inside its write transaction (LMDB runs
// one at a time across processes), so a rollout two workers find due at once enters the finished log exactly once,
// and only the process whose finish was committed counts it in /metrics (summed over workers). Sweeping on all
// processes rather than one means no deadline waits for a worker that died to be restarted.
//
// A call in flight when the deadline hits is not cut: it completes for its harness and is recorded on the rollout,
// like any call that ends after a finish: the trajectories delivered hold it only if it was committed before the
// stream rebuilt the rollout, and the rollout has no reward to train it with either way. Calls arriving after the
// finish are refused (409) and recorded `rejected`.
import type { RolloutRecord } from "../store/records.ts";
import type { GatewayContext } from "./context.ts";

/** `serve --rollout-timeout`'s default: longer than any agent run we know of, short enough to free a group the same day. */
export const DEFAULT_ROLLOUT_TIMEOUT_MS = 3_600_000;
/** How often the due rollouts are looked for: a rollout ends within this much after its deadline. */
export const DEFAULT_DEADLINE_SWEEP_MS = 1_000;
/** Due rollouts finished per store read. */
const PAGE = 100;

/** Metadata a deadline finish adds to the rollout's, saying why it ended. */
export const FINISHED_BY_DEADLINE = { finished_by: "deadline" } as const;

export class RolloutDeadlines {
  readonly #ctx: Pick<GatewayContext, "store" | "metrics" | "log">;
  readonly #timer: NodeJS.Timeout;
  #sweeping: Promise<number> | null = null;
  #closed = false;

  constructor(ctx: Pick<GatewayContext, "store" | "metrics" | "log">, intervalMs = DEFAULT_DEADLINE_SWEEP_MS) {
    this.#ctx = ctx;
    this.#timer = setInterval(() => void this.sweep(), intervalMs);
    this.#timer.unref();
  }

  /**
   * Finishes every open rollout due at `now`; resolves with how many this process finished. A sweep already running
   * is joined, not doubled.
   */
  sweep(now = Date.now()): Promise<number> {
    if (this.#closed) return Promise.resolve(0);
    this.#sweeping ??= this.#sweep(now)
      .catch((error: unknown) => {
        this.#ctx.log.error({ err: error }, "rollout deadline sweep failed (retried at the next one)");
        return 0;
      })
      .finally(() => (this.#sweeping = null));
    return this.#sweeping;
  }

  async #sweep(now: number): Promise<number> {
    const { store } = this.#ctx;
    // A full store refuses the finishes anyway (and says so once): due rollouts wait for the sweep after space returns.
    if (store.writeRefusal()) return 0;
    let finished = 0;
    for (;;) {
      const due = store.dueRollouts(now, PAGE);
      const results = await Promise.all(
        due.map(({ deadlineAt, rolloutId }) => this.#expire(deadlineAt, rolloutId, now)),
      );
      finished += results.filter(Boolean).length;
      if (due.length < PAGE || this.#closed) return finished;
    }
  }

  /** Finishes one due rollout; true when this process's finish was the one committed. */
  async #expire(deadlineAt: number, rolloutId: string, now: number): Promise<boolean> {
    const { store } = this.#ctx;
    const rollout = store.getRollout(rolloutId);
    if (!rollout || rollout.status !== "open" || rollout.deadlineAt !== deadlineAt) {
      // Finished meanwhile (the finish drops the entry itself), or re-put with another deadline: a stale entry.
      await store.dropDeadline(deadlineAt, rolloutId);
      return false;
    }
    const timedOut: RolloutRecord = {
      ...rollout,
      status: "timeout",
      reward: null,
      metadata: { ...rollout.metadata, ...FINISHED_BY_DEADLINE },
      finishedAt: now,
    };
    const cursor = await store.finishOpenRollout(timedOut);
    if (cursor === null) return false; // finished by its driver or another worker a moment ago
    this.#ctx.metrics.rolloutsTimedOut.inc();
    this.#ctx.log.info({ rolloutId, deadlineAt, cursor }, "rollout finished as timeout at its deadline");
    return true;
  }

  /** Stops sweeping; resolves once a sweep in progress is done (before the store closes). */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#sweeping;
  }
}
