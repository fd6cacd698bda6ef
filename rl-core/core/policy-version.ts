// The core's current policy version, what staleness counts from (staleness.ts). Two sources, with one rule each:
// - A trainer's ResumePolicy names the version the gateways serve from now on: it becomes current, even when it is
//   lower than the one before (a trainer restarted from an older checkpoint, a new run on the same core store, a
//   mistyped high version corrected). A resume that lowers it is logged and counted (`onLowered`).
// - The versions on the calls of the rollouts the core receives (their policy_version and version runs) raise it, for
//   a core whose trainer updates the weights by other means, but only until a resume names one: after that, a late
//   rollout of an abandoned run, which may carry a higher version, cannot undo what the trainer said.
// Versions are strings; staleness orders them by a number, so a version has one only when the number is all it says:
// an integer, optionally after `v` or a word without digits ending in `-` or `_` (42, v42, step-42, ckpt_0042).
// Others (v2.0, ckpt_7b_0003, a git hash) have none: such a version can be current when a resume names it, but no
// token is judged against it, nor is a token of it judged stale. Kept in the core's store across restarts.
import type { CallInfo } from "../../protocol/index.ts";

const NUMBERED = /^(?:v|[A-Za-z]*[-_])?(\d+)$/;

/** The number a version is named by (see above), or null (none, or too large to be exact). */
export function versionNumber(version: string | null | undefined): number | null {
  const digits = NUMBERED.exec(version ?? "")?.[1];
  if (digits === undefined) return null;
  const n = Number(digits);
  return Number.isSafeInteger(n) ? n : null;
}

/** Every version a rollout's calls name: each call's own and those of its version runs. */
export function callVersions(calls: readonly CallInfo[] | undefined): string[] {
  return (calls ?? []).flatMap((c) => [c.policyVersion, ...(c.versionRuns ?? []).map((r) => r.version)]);
}

export interface CurrentVersionOptions {
  /** Keeps each new current version (the core's store); the promise settles once it is written. */
  save: (version: string) => Promise<void> | void;
  /** A resume named a version lower than the current one (or one without a number after one with). */
  onLowered?: (from: string, to: string) => void;
}

export class CurrentVersion {
  #version: string;
  #number: number | null;
  #resumed = false;
  #lowered = 0;
  #saving: Promise<void> = Promise.resolve();
  readonly #options: CurrentVersionOptions;

  /** Starts from `stored` (the store's, "" none). */
  constructor(stored: string, options: CurrentVersionOptions) {
    this.#version = stored;
    this.#number = versionNumber(stored);
    this.#options = options;
  }

  /** The current version ("" none seen yet). */
  get version(): string {
    return this.#version;
  }

  /** Its number (null: none, and nothing is judged stale). */
  get number(): number | null {
    return this.#number;
  }

  /** Resumes that lowered the current version, since the core started. */
  get lowered(): number {
    return this.#lowered;
  }

  /** A trainer's resume named `version` (relayed to every gateway): it is current from now on, whatever it was. */
  resume(version: string): void {
    this.#resumed = true;
    if (version === this.#version) return;
    const n = versionNumber(version);
    if (this.#number !== null && (n === null || n < this.#number)) {
      this.#lowered++;
      this.#options.onLowered?.(this.#version, version);
    }
    this.#set(version, n);
  }

  /** Rollouts' versions: the newest numbered one raises the current version, until a resume named one. */
  observe(versions: Iterable<string>): boolean {
    if (this.#resumed) return false;
    let newest: { version: string; n: number } | null = null;
    for (const version of versions) {
      const n = versionNumber(version);
      if (n !== null && (this.#number === null || n > this.#number) && (!newest || n > newest.n))
        newest = { version, n };
    }
    if (newest) this.#set(newest.version, newest.n);
    return newest !== null;
  }

  /** Settles once every version set so far is written (the core waits for it before it closes its store). */
  saved(): Promise<void> {
    return this.#saving;
  }

  #set(version: string, n: number | null): void {
    this.#version = version;
    this.#number = n;
    // A failed write is not retried: the next resume names the version again.
    const write = Promise.resolve(this.#options.save(version)).catch(() => {});
    this.#saving = Promise.all([this.#saving, write]).then(() => {});
  }
}
