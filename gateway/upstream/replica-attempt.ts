// One call's trip to one replica, between undici and the call's own handler (UpstreamCall): it keeps the replica's
// figures (in flight, requests, errors), tells the replica's health what happened, and — when the replica could not
// even be connected to — hands the call to the next replica instead of failing it. Nothing of the request reached a
// replica that refused the connection, so the retry cannot run a call on the model twice; any later failure (a reset
// after the request was written, a timeout, a 5xx) is the call's outcome, never retried.
import type { Dispatcher } from "undici";
import type { Replica } from "./replica.ts";

/** Errors raised before a connection existed: the request never left rlgate. */
const CONNECT_FAILURES = new Set([
  "ECONNREFUSED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
]);

export function isConnectFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && CONNECT_FAILURES.has(code);
}

/** The harness left (rlgate aborted the request): not the replica's fault. */
function isAbort(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "UND_ERR_ABORTED";
}

export type LegacyHandler = Required<
  Pick<Dispatcher.DispatchHandler, "onConnect" | "onHeaders" | "onData" | "onComplete" | "onError">
>;

export class ReplicaAttempt implements Dispatcher.DispatchHandler {
  readonly replica: Replica;
  readonly #call: LegacyHandler;
  /** Offered a connect failure; true when it sent the call elsewhere (this attempt then stays silent). */
  readonly #retry: (error: Error) => boolean;
  #answered = false;
  #ended = false;

  constructor(replica: Replica, call: LegacyHandler, retry: (error: Error) => boolean) {
    this.replica = replica;
    this.#call = call;
    this.#retry = retry;
    replica.requests++;
    replica.inFlight++;
  }

  onConnect(abort: (reason?: Error) => void): void {
    this.#call.onConnect(abort);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    if (statusCode >= 200 && !this.#answered) {
      this.#answered = true;
      if (statusCode >= 500) this.replica.failed("answer", `HTTP ${statusCode}`);
      else this.replica.succeeded();
    }
    return this.#call.onHeaders(statusCode, rawHeaders, resume, statusText);
  }

  onData(chunk: Buffer): boolean {
    return this.#call.onData(chunk);
  }

  onComplete(trailers: string[] | null): void {
    this.#end();
    this.#call.onComplete(trailers);
  }

  onError(error: Error): void {
    this.#end();
    if (!isAbort(error)) {
      const connect = !this.#answered && isConnectFailure(error);
      this.replica.failed(connect ? "connect" : "answer", error.message);
      if (connect && this.#retry(error)) return;
    }
    this.#call.onError(error);
  }

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.replica.inFlight--;
  }
}
