// Validation of a completions request body: only what rlgate relies on is checked; every other field is forwarded
// untouched so that the upstream stays the judge of its own parameters.
import { GatewayError } from "../../errors.ts";

export interface CompletionRequest extends Record<string, unknown> {
  model?: string;
  prompt: string | string[] | number[] | number[][];
  stream?: boolean | null;
  logprobs?: number | null;
  return_token_ids?: boolean | null;
}

function invalid(param: string, message: string): GatewayError {
  return new GatewayError("RLGATE_BAD_REQUEST", `invalid request: ${param}: ${message}`, { param });
}

function isPrompt(value: unknown): boolean {
  if (typeof value === "string") return true;
  if (!Array.isArray(value)) return false;
  return (
    value.every((v) => typeof v === "string") ||
    value.every((v) => Number.isInteger(v)) ||
    value.every((v) => Array.isArray(v) && v.every((id) => Number.isInteger(id)))
  );
}

export function parseCompletionRequest(body: unknown): CompletionRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new GatewayError("RLGATE_BAD_REQUEST", "request body must be a JSON object");
  }
  const request = body as Record<string, unknown>;
  if (request["prompt"] === undefined) throw invalid("prompt", "'prompt' is required");
  if (!isPrompt(request["prompt"])) {
    throw invalid(
      "prompt",
      "expected a string, an array of strings, an array of token ids, or an array of such arrays",
    );
  }
  if (request["model"] !== undefined && typeof request["model"] !== "string")
    throw invalid("model", "expected a string");
  const stream = request["stream"];
  if (stream != null && typeof stream !== "boolean") throw invalid("stream", "expected a boolean");
  const logprobs = request["logprobs"];
  if (logprobs != null && !(Number.isInteger(logprobs) && (logprobs as number) >= 0)) {
    throw invalid("logprobs", "expected an integer ≥ 0 (the number of top logprobs per token)");
  }
  const ids = request["return_token_ids"];
  if (ids != null && typeof ids !== "boolean") throw invalid("return_token_ids", "expected a boolean");
  return request as CompletionRequest;
}
