// The one error root of rlgate: every error it raises on purpose carries a stable string `code` (RLGATE_…) and
// passes its `cause` on. An error that is not an RlgateError is a bug, whatever its class (a TypeError from a
// wrong assumption is rlgate's fault, not the caller's): the gRPC and HTTP boundaries answer it as internal and log
// its stack.
export class RlgateError<Code extends string = string> extends Error {
  readonly code: Code;

  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "RlgateError";
    this.code = code;
  }
}

/** The stack of an error (its message when it has none), for a log line. */
export function describeError(error: unknown): string {
  return error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error);
}
