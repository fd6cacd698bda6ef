// What a flavour's route handler hands back to the server core, which owns sockets, timing and faults.
import { RlgateError } from "../util/errors.ts";

export type Reply = JsonReply | StreamReply;

/** What a generation read: each prompt's token ids (the prefix-cache model's input, prefix-cache.ts). */
interface Prefill {
  prompts?: readonly (readonly number[])[];
}

/** `reply` with the prompts it generated from. */
export function withPrompts<R extends Reply>(reply: R, prompts: readonly (readonly number[])[]): R {
  reply.prompts = prompts;
  return reply;
}

export interface JsonReply extends Prefill {
  kind: "json";
  status: number;
  /** undefined: an empty body (vLLM's /health). */
  body: unknown;
  /** Engine steps the response took (tokens of the longest choice): scales the simulated latency. */
  steps?: number;
}

export interface StreamReply extends Prefill {
  kind: "stream";
  /** Server-sent event payloads (JSON text), grouped by engine step: one step is written at once. */
  steps: string[][];
  /** Payloads after the last step (the usage chunk); `data: [DONE]` follows. */
  tail: string[];
}

/** An error a route reports to the client in the flavour's error shape. */
export class SimHttpError extends RlgateError<"RLGATE_SIM_HTTP"> {
  readonly status: number;
  readonly errorType: string;
  readonly param: string | null;

  constructor(
    status: number,
    message: string,
    options: { type?: string; param?: string | null; cause?: unknown } = {},
  ) {
    super("RLGATE_SIM_HTTP", message, { cause: options.cause });
    this.name = "SimHttpError";
    this.status = status;
    this.errorType =
      options.type ?? (status === 404 ? "NotFoundError" : status >= 500 ? "InternalServerError" : "BadRequestError");
    this.param = options.param ?? null;
  }
}

export function badRequest(message: string, cause?: unknown): SimHttpError {
  return new SimHttpError(400, message, { cause });
}
