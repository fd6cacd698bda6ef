// The core's current policy version: the newest version it has seen, from a trainer's ResumePolicy or from the calls
// of the rollouts it receives (their policy_version and version runs). Versions are strings; the core orders them by
// the number each ends with (42, v42, step-42), the only way a staleness `current − K` has a meaning. A version
// without one is never current and never judged stale. The current version only rises: a late rollout of an older
// version, or a resume naming one, does not take it back. Kept in the core's store across restarts.
import type { CallInfo } from "../../protocol/index.ts";

/** The number a version ends with, or null (no digits at its end, or too large to be exact). */
export function versionNumber(version: string | null | undefined): number | null {
  const digits = /(\d+)$/.exec(version ?? "")?.[1];
  if (digits === undefined) return null;
  const n = Number(digits);
  return Number.isSafeInteger(n) ? n : null;
}

/** Every version a rollout's calls name: each call's own and those of its version runs. */
export function callVersions(calls: readonly CallInfo[] | undefined): string[] {
  return (calls ?? []).flatMap((c) => [c.policyVersion, ...(c.versionRuns ?? []).map((r) => r.version)]);
}

export class CurrentVersion {
  #version: string;
  #number: number | null;
  readonly #save: (version: string) => void;

  /** Starts from `stored` (the store's, "" none); `save` keeps each new current version. */
  constructor(stored: string, save: (version: string) => void) {
    this.#version = stored;
    this.#number = versionNumber(stored);
    this.#save = save;
  }

  /** The current version ("" none seen yet). */
  get version(): string {
    return this.#version;
  }

  /** Its number (null: none yet). */
  get number(): number | null {
    return this.#number;
  }

  /** Takes the newest of the versions given; true when the current version rose. */
  observe(versions: Iterable<string>): boolean {
    let rose = false;
    for (const version of versions) {
      const n = versionNumber(version);
      if (n === null || (this.#number !== null && n <= this.#number)) continue;
      this.#version = version;
      this.#number = n;
      rose = true;
    }
    if (rose) this.#save(this.#version);
    return rose;
  }
}
