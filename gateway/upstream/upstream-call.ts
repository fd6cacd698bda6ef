// One request to the upstream through undici's handler interface (`pool.dispatch`). Capture reads every byte of the
// answer anyway, so the body is handed over as the parser produces it: no Readable stream, no async resource, no
// abort-signal listeners between the socket and rlgate — the per-call and per-chunk work of a bare forwarder.
import type { Dispatcher } from "undici";
import { errors as undiciErrors, util as undiciUtil } from "undici";

export type UpstreamHeaders = Record<string, string | string[] | undefined>;

/** Receives body chunks; returning false pauses the upstream until `resume()` (the harness is not keeping up). */
export type Sink = (chunk: Buffer) => boolean | void;

/** An upstream's answer as the relays read it: its head, then its body whole or chunk by chunk. */
export interface UpstreamAnswer {
  readonly statusCode: number;
  readonly headers: UpstreamHeaders;
  readAll(): Promise<Buffer>;
  pump(sink: Sink): Promise<void>;
  resume(): void;
  abort(): void;
}

export class UpstreamCall implements Dispatcher.DispatchHandler, UpstreamAnswer {
  /** 0 until the response head arrived. */
  statusCode = 0;
  headers: UpstreamHeaders = {};
  readonly head: Promise<UpstreamCall>;
  #headSettle!: { resolve: (call: UpstreamCall) => void; reject: (error: unknown) => void };
  #abortRequest: ((reason?: Error) => void) | null = null;
  #resumeRequest: (() => void) | null = null;
  #abortReason: Error | null = null;
  // Body bytes that arrived before a consumer attached (they can come in the same read as the head).
  #buffered: Buffer[] = [];
  #sink: Sink | null = null;
  #ended = false;
  #failure: unknown = null;
  #bodySettle: { resolve: () => void; reject: (error: unknown) => void } | null = null;

  constructor() {
    this.head = new Promise((resolve, reject) => (this.#headSettle = { resolve, reject }));
  }

  /** Aborts the request (the harness left): the upstream connection is closed, the upstream stops generating. */
  abort(): void {
    this.#abortReason ??= new undiciErrors.RequestAbortedError();
    this.#abortRequest?.(this.#abortReason);
  }

  /** The whole body. Rejects when the upstream's body failed (reset, timeout) or the call was aborted. */
  async readAll(): Promise<Buffer> {
    const chunks: Buffer[] = [];
    await this.pump((chunk) => {
      chunks.push(chunk);
    });
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  }

  /** Reads on after `sink` returned false. */
  resume(): void {
    this.#resumeRequest?.();
  }

  /** Feeds body chunks to `sink` as they arrive; resolves at the end of the body, rejects when it failed. */
  pump(sink: Sink): Promise<void> {
    const buffered = this.#buffered;
    this.#buffered = [];
    try {
      for (const chunk of buffered) sink(chunk);
    } catch (error) {
      // As a throw from onData would: the upstream request is aborted.
      this.#abortRequest?.(error as Error);
      return Promise.reject(error);
    }
    if (this.#failure !== null) return Promise.reject(this.#failure);
    if (this.#ended) return Promise.resolve();
    this.#sink = sink;
    return new Promise((resolve, reject) => (this.#bodySettle = { resolve, reject }));
  }

  // undici's handler callbacks.

  onConnect(abort: (reason?: Error) => void): void {
    this.#abortRequest = abort;
    if (this.#abortReason) abort(this.#abortReason);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, _statusText: string): boolean {
    if (statusCode < 200) return true; // 1xx: the real head follows
    this.#resumeRequest = resume;
    this.statusCode = statusCode;
    this.headers = undiciUtil.parseHeaders(rawHeaders) as UpstreamHeaders;
    this.#headSettle.resolve(this);
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.#sink) return this.#sink(chunk) !== false;
    this.#buffered.push(chunk);
    return true;
  }

  onComplete(_trailers: string[] | null): void {
    this.#ended = true;
    this.#sink = null;
    this.#bodySettle?.resolve();
  }

  onError(error: Error): void {
    if (this.statusCode === 0) {
      this.#headSettle.reject(error);
      return;
    }
    this.#failure = error;
    this.#sink = null;
    this.#bodySettle?.reject(error);
  }
}
