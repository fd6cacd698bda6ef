// The gRPC link's error root, and the one place any error becomes a gRPC status (errorToStatus).
import { Metadata, status as Status, type ServiceError, type StatusObject } from "@grpc/grpc-js";

export type LinkErrorCode =
  | "RLGATE_BAD_REQUEST"
  | "RLGATE_UNAUTHORIZED"
  | "RLGATE_NOT_FOUND"
  | "RLGATE_MESSAGE_TOO_LARGE"
  | "RLGATE_SESSION_EXPIRED"
  | "RLGATE_CANCELLED"
  | "RLGATE_UNAVAILABLE"
  | "RLGATE_INTERNAL";

export class LinkError extends Error {
  override readonly name = "LinkError";
  readonly code: LinkErrorCode;

  constructor(code: LinkErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
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

/** Any error → the status a gRPC handler answers with; the message travels as `details`, prefixed by its code. */
export function errorToStatus(error: unknown): Partial<StatusObject> & { code: Status; details: string } {
  const code = typeof error === "object" && error !== null ? (error as { code?: unknown }).code : undefined;
  const message = error instanceof Error ? error.message : String(error);
  let status = Status.INTERNAL;
  if (typeof code === "string") {
    status = BY_CODE[code] ?? (code.startsWith("RLGATE_KERNEL_BAD") ? Status.INVALID_ARGUMENT : Status.INTERNAL);
  } else if (error instanceof RangeError || error instanceof TypeError) {
    status = Status.INVALID_ARGUMENT;
  }
  const metadata = new Metadata();
  if (typeof code === "string") metadata.set("rlgate-code", code);
  return { code: status, details: typeof code === "string" ? `${code}: ${message}` : message, metadata };
}

/** A client-side status error (from a failed call) in words. */
export function describeStatus(error: unknown): string {
  const e = error as Partial<ServiceError>;
  return e && typeof e.code === "number" ? `${Status[e.code] ?? e.code}: ${e.details ?? e.message}` : String(error);
}
