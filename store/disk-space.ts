// The store's view of its filesystem's free space. A write is refused before it starts while the filesystem holds less
// than a reserve, or after a write failed for lack of space until space returns: the harness gets a clear error
// (RLGATE_STORE_FULL) instead of a call the store could not keep, and nothing is half-written (LMDB commits all of a
// transaction or none of it). Entering and leaving that state is logged once each, not once per refused write.
import { statfsSync } from "node:fs";
import { RlgateError } from "../util/errors.ts";

/** Default free bytes kept back: writes are refused below it. Room for a burst of calls between two looks. */
export const DEFAULT_STORE_RESERVE = 64 * 1024 ** 2;

/**
 * How long a look at the free space is trusted (ms). statfs costs ~4 µs on the development machine; a call would pay
 * it twice (before going upstream, at its commit). Between two looks the gateway writes at most a few MB at its
 * fastest, well inside the default reserve; a write that still finds the disk full fails with ENOSPC, which sets the
 * same state.
 */
const LOOK_INTERVAL_MS = 50;

/** After a write failed for lack of space, writes resume once this much more than the reserve is free. */
const RESUME_MARGIN = 1024 ** 2;

export class StoreFullError extends RlgateError<"RLGATE_STORE_FULL"> {
  readonly freeBytes: number;

  constructor(path: string, freeBytes: number, reserveBytes: number, cause?: unknown) {
    super(
      "RLGATE_STORE_FULL",
      `the store's disk is full: ${path} has ${freeBytes} bytes free` +
        (reserveBytes > 0 ? ` (rlgate keeps ${reserveBytes} in reserve)` : "") +
        "; nothing was recorded, retry once space is freed",
      { cause },
    );
    this.name = "StoreFullError";
    this.freeBytes = freeBytes;
  }
}

/** Whether a failed write failed for lack of space (ENOSPC from a commit's pwrite, EDQUOT from a quota). */
export function isNoSpace(error: unknown): boolean {
  const text = error instanceof Error ? `${(error as NodeJS.ErrnoException).code ?? ""} ${error.message}` : "";
  return /ENOSPC|EDQUOT|No space left on device|Disk quota exceeded/i.test(text);
}

export interface DiskSpaceOptions {
  path: string;
  /** Free bytes kept back (default `DEFAULT_STORE_RESERVE`); 0: refuse only after a write failed for lack of space. */
  reserveBytes?: number;
  /** Where the two transitions are told (default: stderr). */
  log?: (line: string) => void;
  /**
   * Bytes of the store's file that no table holds: LMDB writes into them before it grows the file, so they count as
   * free (retention frees them: a full store records again once retention removed enough).
   */
  reusableBytes?: () => number;
}

export class DiskSpace {
  readonly path: string;
  readonly reserveBytes: number;
  readonly #log: (line: string) => void;
  readonly #reusable: () => number;
  /** Free bytes at the last look, and when it was. */
  #free = Number.POSITIVE_INFINITY;
  #lookedAt = Number.NEGATIVE_INFINITY;
  /** While full: the free bytes at which writes resume. */
  #resumeAt: number | null = null;

  constructor(options: DiskSpaceOptions) {
    this.path = options.path;
    this.reserveBytes = options.reserveBytes ?? DEFAULT_STORE_RESERVE;
    this.#log = options.log ?? ((line) => process.stderr.write(`[rlgate] ${line}\n`));
    this.#reusable = options.reusableBytes ?? (() => 0);
  }

  /** Whether writes are refused now. */
  get full(): boolean {
    this.#look();
    return this.#resumeAt !== null;
  }

  /** The error a write is refused with while the store is full; null when it may go ahead. */
  refusal(): StoreFullError | null {
    return this.full ? new StoreFullError(this.path, this.#free, this.reserveBytes) : null;
  }

  /**
   * What a failed write rejects with: for lack of space a StoreFullError (and writes are refused from now on until
   * space returns), any other error as it is.
   */
  failed(error: unknown): unknown {
    if (error instanceof StoreFullError) return error;
    // lmdb-js rejects each write of a failed asynchronous commit with "Commit failed" and the commit's own error in a
    // promise (`commitError`) that no one else awaits: taken here, it is no unhandled rejection.
    const commitError = (error as { commitError?: unknown } | null)?.commitError;
    if (commitError instanceof Promise) commitError.catch(() => {});
    this.#look(true);
    // A short write on a full filesystem reaches lmdb-js as EIO or a bare "Commit failed", not ENOSPC: a write that
    // fails while the filesystem is down to its last MB failed for lack of space.
    if (!isNoSpace(error) && this.#free >= this.reserveBytes + RESUME_MARGIN) return error;
    this.#enter(Math.max(this.#free, this.reserveBytes) + Math.max(this.reserveBytes, RESUME_MARGIN));
    return new StoreFullError(this.path, this.#free, this.reserveBytes, error);
  }

  #look(now = false): void {
    const at = performance.now();
    if (!now && at - this.#lookedAt < LOOK_INTERVAL_MS) return;
    this.#lookedAt = at;
    try {
      const stats = statfsSync(this.path);
      this.#free = Number(stats.bavail) * Number(stats.bsize) + this.#reusable();
    } catch {
      return; // a filesystem that cannot be asked: the writes themselves tell (ENOSPC)
    }
    if (this.#resumeAt === null) {
      if (this.#free < this.reserveBytes) this.#enter(this.reserveBytes + RESUME_MARGIN);
    } else if (this.#free >= this.#resumeAt) {
      this.#resumeAt = null;
      this.#log(`store ${this.path}: ${this.#free} bytes free again; calls and finishes are recorded again`);
    }
  }

  #enter(resumeAt: number): void {
    const first = this.#resumeAt === null;
    this.#resumeAt = Math.max(resumeAt, this.#resumeAt ?? 0);
    if (first)
      this.#log(
        `store ${this.path} is full: ${this.#free} bytes free (reserve ${this.reserveBytes}); new calls, finishes ` +
          `and rollouts are refused with RLGATE_STORE_FULL until ${this.#resumeAt} bytes are free`,
      );
  }
}
