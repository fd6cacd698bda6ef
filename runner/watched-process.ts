// What a rollout's sandbox and a rollout's container share: a spawned process that ends as a SandboxExit, stopped by the
// runner at its timeout, on abort, or when the watchdog sees it past its limits, with the peaks the watchdog saw. How
// it is watched and how it is killed belong to each backend (runner/sandbox.ts, runner/podman.ts).
import type { ChildProcess } from "node:child_process";
import type { SandboxExit, SandboxLimits } from "./sandbox.ts";

export type StopReason = NonNullable<SandboxExit["stopped"]>;

export interface WatchOptions {
  timeoutMs: number;
  signal?: AbortSignal;
}

export abstract class WatchedProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<SandboxExit>;
  protected readonly limits: SandboxLimits;
  #stopped: SandboxExit["stopped"] = null;
  #peakProcesses = 0;
  #peakMemory = 0;
  #unwatch: () => void = () => {};

  /** The subclass starts its watchdog after this (`watchUntilClosed`). */
  protected constructor(child: ChildProcess, limits: SandboxLimits, options: WatchOptions) {
    this.child = child;
    this.limits = limits;
    const started = Date.now();
    let startError: string | null = null;
    const timer = setTimeout(() => this.stop("timeout"), options.timeoutMs);
    const onAbort = () => this.stop("aborted");
    options.signal?.addEventListener("abort", onAbort, { once: true });
    this.exited = new Promise((resolve) => {
      child.on("error", (error) => {
        startError = error.message;
      });
      child.on("close", (code, signal) => {
        clearTimeout(timer);
        this.#unwatch();
        options.signal?.removeEventListener("abort", onAbort);
        this.closed(code);
        resolve({
          code,
          signal,
          stopped: this.#stopped,
          peakProcesses: this.#peakProcesses,
          peakMemoryBytes: this.#peakMemory,
          ms: Date.now() - started,
          startError,
        });
      });
    });
  }

  /** What stops the backend's watchdog once the process closed (its close event comes after the constructors). */
  protected watchUntilClosed(unwatch: () => void): void {
    this.#unwatch = unwatch;
  }

  /** The backend's own clean-up once the process closed, before its exit is resolved; it may still set `stopped`. */
  protected closed(_code: number | null): void {}

  /** Why the runner stopped it, if it did (the first reason wins). */
  protected get stopped(): SandboxExit["stopped"] {
    return this.#stopped;
  }

  /** Whether the process has ended (a stop then has nothing left to kill). */
  protected get ended(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Records why the runner stopped it after the fact (the first reason wins). */
  protected markStopped(why: StopReason): void {
    this.#stopped ??= why;
  }

  stop(why: StopReason): void {
    this.#stopped ??= why;
    if (!this.ended) this.kill();
  }

  /** Kills the process and everything it started. */
  protected abstract kill(): void;

  /** A watchdog reading: kept as a peak (null: not readable this time). */
  protected sample(processes: number | null, memoryBytes: number | null): void {
    if (processes !== null) this.#peakProcesses = Math.max(this.#peakProcesses, processes);
    if (memoryBytes !== null) this.#peakMemory = Math.max(this.#peakMemory, memoryBytes);
  }
}
