// One error root for the gateway. Each error has a stable code and an HTTP status; `toOpenAIErrorBody` is the one
// place that turns it into the body a harness sees (OpenAI's error shape, the shape chat-completion clients parse).

export type GatewayErrorCode =
  | "RLGATE_BAD_REQUEST"
  | "RLGATE_BODY_TOO_LARGE"
  | "RLGATE_NOT_FOUND"
  | "RLGATE_UNKNOWN_ROLLOUT"
  | "RLGATE_ROLLOUT_REQUIRED"
  | "RLGATE_UNAUTHORIZED"
  | "RLGATE_UPSTREAM_UNREACHABLE"
  | "RLGATE_UPSTREAM_TIMEOUT"
  | "RLGATE_INTERNAL";

const STATUS: Record<GatewayErrorCode, number> = {
  RLGATE_BAD_REQUEST: 400,
  RLGATE_BODY_TOO_LARGE: 413,
  RLGATE_NOT_FOUND: 404,
  RLGATE_UNKNOWN_ROLLOUT: 404,
  RLGATE_ROLLOUT_REQUIRED: 400,
  RLGATE_UNAUTHORIZED: 401,
  RLGATE_UPSTREAM_UNREACHABLE: 502,
  RLGATE_UPSTREAM_TIMEOUT: 504,
  RLGATE_INTERNAL: 500,
};

const OPENAI_TYPE: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  404: "not_found_error",
  413: "invalid_request_error",
  502: "upstream_error",
  504: "upstream_error",
  500: "internal_error",
};

export class GatewayError extends Error {
  readonly code: GatewayErrorCode;
  readonly status: number;
  readonly param: string | null;

  constructor(code: GatewayErrorCode, message: string, options: { cause?: unknown; param?: string } = {}) {
    super(message, { cause: options.cause });
    this.name = "GatewayError";
    this.code = code;
    this.status = STATUS[code];
    this.param = options.param ?? null;
  }
}

export function asGatewayError(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new GatewayError("RLGATE_INTERNAL", `internal error: ${message}`, { cause: error });
}

export function toOpenAIErrorBody(error: GatewayError): string {
  return JSON.stringify({
    error: {
      message: error.message,
      type: OPENAI_TYPE[error.status] ?? "invalid_request_error",
      param: error.param,
      code: error.code,
    },
  });
}
