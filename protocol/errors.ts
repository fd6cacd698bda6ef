// The gRPC link's errors, and the one place any error becomes a gRPC status (errorToStatus).
import { Metadata, status as Status, type ServiceError, type StatusObject } from "@grpc/grpc-js";
import { describeError, RlgateError } from "../util/errors.ts";

export type LinkErrorCode =
  | "RLGATE_BAD_REQUEST"
  | "RLGATE_UNAUTHORIZED"
  | "RLGATE_NOT_FOUND"
  | "RLGATE_MESSAGE_TOO_LARGE"
  | "RLGATE_SESSION_EXPIRED"
  | "RLGATE_CANCELLED"
  | "RLGATE_UNAVAILABLE"
  | "RLGATE_INTERNAL";

export class LinkError extends RlgateError<LinkErrorCode> {
  override readonly name = "LinkError";
}

const BY_CODE: Record<string, Status> = {
  RLGATE_BAD_REQUEST: Status.INVALID_ARGUMENT,
  RLGATE_UNAUTHORIZED: Status.UNAUTHENTICATED,
  RLGATE_NOT_FOUND: Status.NOT_FOUND,
  RLGATE_MESSAGE_TOO_LARGE: Status.RESOURCE_EXHAUSTED,
  RLGATE_SESSION_EXPIRED: Status.DEADLINE_EXCEEDED,
  RLGATE_CANCELLED: Status.CANCELLED,
  RLGATE_UNAVAILABLE: Status.UNAVAILABLE,
  RLGATE_INTERNAL: Status.INTERNAL,
  // Estimator and kernel input errors (rl-core/estimators, rl-core/kernels) are the caller's.
  RLGATE_ESTIMATOR_BAD_INPUT: Status.INVALID_ARGUMENT,
  RLGATE_KERNEL_OUT_OF_MEMORY: Status.RESOURCE_EXHAUSTED,
};

function logToStderr(line: string): void {
  process.stderr.write(`${line}\n`);
}

/**
 * Any error → the status a gRPC handler answers with; the message travels as `details`, prefixed by its code. Only an
 * RlgateError's code says whose fault it is: anything else (a TypeError or RangeError included) is a bug of ours, so
 * it is INTERNAL, never INVALID_ARGUMENT, and its stack is logged (as is every INTERNAL).
 */
export function errorToStatus(
  error: unknown,
  log: (line: string) => void = logToStderr,
): Partial<StatusObject> & { code: Status; details: string } {
  const code = error instanceof RlgateError ? error.code : undefined;
  const message = error instanceof Error ? error.message : String(error);
  const status =
    code === undefined
      ? Status.INTERNAL
      : (BY_CODE[code] ?? (code.startsWith("RLGATE_KERNEL_BAD") ? Status.INVALID_ARGUMENT : Status.INTERNAL));
  if (status === Status.INTERNAL) log(`internal error answered as gRPC INTERNAL: ${describeError(error)}`);
  const metadata = new Metadata();
  if (code !== undefined) metadata.set("rlgate-code", code);
  return { code: status, details: code !== undefined ? `${code}: ${message}` : message, metadata };
}

/** A client-side status error (from a failed call) in words. */
export function describeStatus(error: unknown): string {
  const e = error as Partial<ServiceError>;
  return e && typeof e.code === "number" ? `${Status[e.code] ?? e.code}: ${e.details ?? e.message}` : String(error);
}
