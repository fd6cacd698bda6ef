// One error root for the gateway. Each error has a stable code and an HTTP status; this module is the one place that
// turns it into the body a harness sees, in the harness API's own shape: OpenAI's (chat completions, completions,
// Responses), Anthropic's (Messages) or Google's (Gemini).
import { RlgateError } from "../util/errors.ts";
import { StoreFullError } from "../store/disk-space.ts";

export type GatewayErrorCode =
  | "RLGATE_BAD_REQUEST"
  | "RLGATE_BAD_PATH"
  | "RLGATE_BODY_TOO_LARGE"
  | "RLGATE_NOT_FOUND"
  | "RLGATE_UNKNOWN_ROLLOUT"
  | "RLGATE_ROLLOUT_REQUIRED"
  | "RLGATE_UNAUTHORIZED"
  | "RLGATE_ROLLOUT_FINISHED"
  | "RLGATE_CONFLICT"
  | "RLGATE_HEADERS_TOO_LARGE"
  | "RLGATE_EXPECTATION_FAILED"
  | "RLGATE_REQUEST_TIMEOUT"
  | "RLGATE_UPSTREAM_UNREACHABLE"
  | "RLGATE_UPSTREAM_TIMEOUT"
  | "RLGATE_STORE_FULL"
  | "RLGATE_INTERNAL";

const STATUS: Record<GatewayErrorCode, number> = {
  RLGATE_BAD_REQUEST: 400,
  RLGATE_BAD_PATH: 400,
  RLGATE_BODY_TOO_LARGE: 413,
  RLGATE_NOT_FOUND: 404,
  RLGATE_UNKNOWN_ROLLOUT: 404,
  RLGATE_ROLLOUT_REQUIRED: 400,
  RLGATE_UNAUTHORIZED: 401,
  RLGATE_ROLLOUT_FINISHED: 409,
  RLGATE_CONFLICT: 409,
  RLGATE_HEADERS_TOO_LARGE: 431,
  RLGATE_EXPECTATION_FAILED: 417,
  RLGATE_REQUEST_TIMEOUT: 408,
  RLGATE_UPSTREAM_UNREACHABLE: 502,
  RLGATE_UPSTREAM_TIMEOUT: 504,
  // Insufficient Storage: the call was not sent upstream, nothing was recorded; SDKs retry a 5xx.
  RLGATE_STORE_FULL: 507,
  RLGATE_INTERNAL: 500,
};

const OPENAI_TYPE: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  404: "not_found_error",
  409: "conflict_error",
  413: "invalid_request_error",
  502: "upstream_error",
  504: "upstream_error",
  500: "internal_error",
  507: "server_error",
};

export class GatewayError extends RlgateError<GatewayErrorCode> {
  readonly status: number;
  readonly param: string | null;

  constructor(code: GatewayErrorCode, message: string, options: { cause?: unknown; param?: string } = {}) {
    super(code, message, { cause: options.cause });
    this.name = "GatewayError";
    this.status = STATUS[code];
    this.param = options.param ?? null;
  }
}

export function asGatewayError(error: unknown): GatewayError {
  if (error instanceof GatewayError) return error;
  if (error instanceof StoreFullError) return new GatewayError("RLGATE_STORE_FULL", error.message, { cause: error });
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

/** The error shape of the harness API a route belongs to. */
export type ErrorShape = "openai" | "anthropic" | "google";

const ANTHROPIC_TYPE: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  502: "api_error",
  503: "overloaded_error",
  504: "api_error",
  529: "overloaded_error",
};

function anthropicType(status: number): string {
  return ANTHROPIC_TYPE[status] ?? (status >= 500 ? "api_error" : "invalid_request_error");
}

/** Anthropic's error shape: `{type:"error", error:{type, message}}`. */
export function toAnthropicErrorBody(error: GatewayError): string {
  return JSON.stringify({ type: "error", error: { type: anthropicType(error.status), message: error.message } });
}

/** Google's canonical status names (google.rpc.Code) by HTTP status, as the Gemini API writes them. */
const GOOGLE_STATUS: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  408: "DEADLINE_EXCEEDED",
  409: "ABORTED",
  429: "RESOURCE_EXHAUSTED",
  499: "CANCELLED",
  500: "INTERNAL",
  501: "UNIMPLEMENTED",
  502: "UNAVAILABLE",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

export function googleStatus(status: number): string {
  return GOOGLE_STATUS[status] ?? (status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT");
}

/**
 * Google's error shape (Gemini API): `{error:{code, message, status}}`; rlgate's own errors add, as Google's do, an
 * ErrorInfo detail whose reason is rlgate's error code (an upstream's error re-shaped has none).
 */
export function googleErrorBody(code: number, message: string, reason?: string): string {
  const error: Record<string, unknown> = { code, message, status: googleStatus(code) };
  if (reason) error["details"] = [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason, domain: "rlgate" }];
  return JSON.stringify({ error });
}

export function toErrorBody(error: GatewayError, shape: ErrorShape): string {
  if (shape === "google") return googleErrorBody(error.status, error.message, error.code);
  return shape === "anthropic" ? toAnthropicErrorBody(error) : toOpenAIErrorBody(error);
}

function field(value: unknown, key: string): unknown {
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}

/**
 * An error the upstream answered a translated call with, re-shaped for the harness's API (the HTTP status is kept).
 * Upstreams write `{error:{message,type,param,code}}` (vLLM), `{object:"error",message,type,param,code}` (SGLang)
 * or FastAPI's `{detail}`; the message and what else is there is carried over.
 */
export function upstreamErrorBody(shape: ErrorShape, status: number, upstreamBody: unknown): string {
  const inner = typeof field(upstreamBody, "error") === "object" ? field(upstreamBody, "error") : upstreamBody;
  const raw = field(inner, "message") ?? field(upstreamBody, "detail");
  const message =
    typeof raw === "string"
      ? raw
      : typeof upstreamBody === "string" && upstreamBody
        ? upstreamBody
        : `the upstream answered HTTP ${status}`;
  if (shape === "anthropic") return JSON.stringify({ type: "error", error: { type: anthropicType(status), message } });
  if (shape === "google") return googleErrorBody(status, message);
  const type = field(inner, "type");
  const param = field(inner, "param");
  const code = field(inner, "code");
  return JSON.stringify({
    error: {
      message,
      type: typeof type === "string" ? type : (OPENAI_TYPE[status] ?? "upstream_error"),
      param: typeof param === "string" ? param : null,
      code: typeof code === "string" || typeof code === "number" ? code : status,
    },
  });
}
