// Readers for the token-id and logprob fields inference servers add to OpenAI-shaped bodies. Both vLLM and SGLang
// use the same names (`prompt_token_ids`, `token_ids`, chat `logprobs.content[].logprob`, completions
// `logprobs.token_logprobs`); they differ in where the prompt ids sit and how absent fields are written.

import { GatewayError } from "../errors.ts";

export type Json = Record<string, unknown>;

export function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function numberArray(value: unknown): number[] | null {
  if (!Array.isArray(value)) return null;
  for (const item of value) if (typeof item !== "number") return null;
  return value as number[];
}

/** Chat `choices[].logprobs.content[].logprob` → numbers (null when the upstream sent none). */
export function chatLogprobs(choice: Json): number[] | null {
  const content = chatLogprobEntries(choice);
  return content === null ? null : content.map(logprobOf);
}

/** Chat `choices[].logprobs.content` (null when the upstream sent none). */
export function chatLogprobEntries(choice: Json): unknown[] | null {
  const logprobs = choice["logprobs"];
  if (!isObject(logprobs) || !Array.isArray(logprobs["content"])) return null;
  return logprobs["content"] as unknown[];
}

/** One chat logprob entry's `logprob` (NaN when it has none: such ids are never trained on). */
export function logprobOf(entry: unknown): number {
  return isObject(entry) && typeof entry["logprob"] === "number" ? entry["logprob"] : Number.NaN;
}

/** Completions `choices[].logprobs.token_logprobs` → numbers (null when the upstream sent none). */
export function completionLogprobs(choice: Json): number[] | null {
  const logprobs = choice["logprobs"];
  if (!isObject(logprobs) || !Array.isArray(logprobs["token_logprobs"])) return null;
  return (logprobs["token_logprobs"] as unknown[]).map((value) => (typeof value === "number" ? value : Number.NaN));
}

export function choicesOf(body: Json): Json[] {
  const choices = body["choices"];
  return Array.isArray(choices) ? (choices.filter(isObject) as Json[]) : [];
}

export function choiceIndex(choice: Json, fallback: number): number {
  return typeof choice["index"] === "number" ? choice["index"] : fallback;
}

/**
 * A harness value where text is expected: a string as it is, a number or boolean written out, absent as `fallback`.
 * An object or array is the client's mistake — a 400 naming `param`, never `String()` on it (which throws for
 * `{"toString":1}`).
 */
export function textField(value: unknown, param: string, fallback = ""): string {
  if (value === undefined || value === null) return fallback;
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  throw new GatewayError("RLGATE_BAD_REQUEST", `${param}: expected a string`, { param });
}

/** Any harness value, shown in an error message (at most 200 characters); never throws. */
export function shown(value: unknown): string {
  return typeof value === "string" ? value.slice(0, 200) : (JSON.stringify(value) ?? typeof value).slice(0, 200);
}
