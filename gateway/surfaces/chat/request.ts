// Validation of a chat-completions request body: only what rlgate relies on is checked; every other field is
// forwarded untouched so that the upstream stays the judge of its own parameters. Hand-written rather than a schema
// library: it runs on every call, and a schema pass over `messages` cost ~40 µs a call.
import { GatewayError } from "../../errors.ts";

export interface ChatRequest extends Record<string, unknown> {
  model?: string;
  messages: Array<Record<string, unknown>>;
  stream?: boolean;
  n?: number;
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  return_token_ids?: boolean | null;
}

function invalid(param: string, message: string): GatewayError {
  return new GatewayError("RLGATE_BAD_REQUEST", `invalid request: ${param}: ${message}`, { param });
}

function optional(body: Record<string, unknown>, key: string, type: "string" | "boolean", nullable = false): void {
  const value = body[key];
  if (value === undefined || (nullable && value === null)) return;
  if (typeof value !== type) throw invalid(key, `expected a ${type}, got ${JSON.stringify(value)?.slice(0, 40)}`);
}

function optionalInteger(body: Record<string, unknown>, key: string, min: number, nullable = false): void {
  const value = body[key];
  if (value === undefined || (nullable && value === null)) return;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min) {
    throw invalid(key, `expected an integer ≥ ${min}, got ${JSON.stringify(value)?.slice(0, 40)}`);
  }
}

export function parseChatRequest(body: unknown): ChatRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new GatewayError("RLGATE_BAD_REQUEST", "request body must be a JSON object");
  }
  const request = body as Record<string, unknown>;
  const messages = request["messages"];
  if (messages === undefined) throw invalid("messages", "'messages' is required");
  if (!Array.isArray(messages)) throw invalid("messages", "'messages' must be an array of messages");
  if (messages.length === 0) throw invalid("messages", "'messages' must not be empty");
  for (let i = 0; i < messages.length; i++) {
    const message: unknown = messages[i];
    if (typeof message !== "object" || message === null || Array.isArray(message)) {
      throw invalid(`messages.${i}`, "each message must be an object");
    }
    if (typeof (message as Record<string, unknown>)["role"] !== "string") {
      throw invalid(`messages.${i}.role`, "each message needs a string 'role'");
    }
  }
  optional(request, "model", "string");
  optional(request, "stream", "boolean", true);
  optional(request, "logprobs", "boolean", true);
  optional(request, "return_token_ids", "boolean", true);
  optionalInteger(request, "n", 1, true);
  optionalInteger(request, "top_logprobs", 0, true);
  return request as ChatRequest;
}
