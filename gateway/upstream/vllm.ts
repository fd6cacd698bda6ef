// What rlgate asks of a vLLM (>= 0.10.2) upstream, and how it reads token ids and logprobs back.
// rlgate adds `return_token_ids` and `logprobs` to every captured request and remembers whether the harness asked for
// them itself, so the response can be given back exactly as the upstream would have sent it to the harness.

/** Which of the fields rlgate adds the harness asked for itself. */
export interface HarnessWants {
  tokenIds: boolean;
  logprobs: boolean;
}

export interface PreparedRequest {
  forwarded: Record<string, unknown>;
  wants: HarnessWants;
}

export function prepareChatRequest(body: Record<string, unknown>): PreparedRequest {
  const wants: HarnessWants = { tokenIds: body["return_token_ids"] === true, logprobs: body["logprobs"] === true };
  const forwarded: Record<string, unknown> = { ...body, return_token_ids: true };
  if (!wants.logprobs) forwarded["logprobs"] = true;
  return { forwarded, wants };
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Chat `choices[].logprobs.content[].logprob` → numbers (null when the upstream sent none). */
export function chatLogprobs(choice: Json): number[] | null {
  const logprobs = choice["logprobs"];
  if (!isObject(logprobs) || !Array.isArray(logprobs["content"])) return null;
  return (logprobs["content"] as unknown[]).map((entry) =>
    isObject(entry) && typeof entry["logprob"] === "number" ? entry["logprob"] : Number.NaN,
  );
}

export function numberArray(value: unknown): number[] | null {
  if (!Array.isArray(value)) return null;
  for (const item of value) if (typeof item !== "number") return null;
  return value as number[];
}

/**
 * Removes from a non-streamed chat response what the harness did not ask for. vLLM serializes these fields as null
 * when they were not requested, so they are set to null (not deleted) to give the harness the bytes it would have got.
 */
export function stripChatResponse(response: Json, wants: HarnessWants): void {
  if (!wants.tokenIds && "prompt_token_ids" in response) response["prompt_token_ids"] = null;
  const choices = response["choices"];
  if (!Array.isArray(choices)) return;
  for (const choice of choices) {
    if (!isObject(choice)) continue;
    if (!wants.tokenIds && "token_ids" in choice) choice["token_ids"] = null;
    if (!wants.logprobs && "logprobs" in choice) choice["logprobs"] = null;
  }
}

/**
 * The same for one streamed chunk. vLLM writes chunks with every field it set explicitly, None included, so a chunk
 * of an un-asked-for stream carries `prompt_token_ids: null` / `token_ids: null` / `logprobs: null`.
 */
export function stripChatChunk(chunk: Json, wants: HarnessWants): void {
  if (!wants.tokenIds && "prompt_token_ids" in chunk) chunk["prompt_token_ids"] = null;
  const choices = chunk["choices"];
  if (!Array.isArray(choices)) return;
  for (const choice of choices) {
    if (!isObject(choice)) continue;
    if (!wants.tokenIds && "token_ids" in choice) choice["token_ids"] = null;
    if (!wants.logprobs && "logprobs" in choice) choice["logprobs"] = null;
  }
}

/**
 * True for a chunk that exists only to carry token ids: vLLM emits tokens that produce no text (`<think>`,
 * `<tool_call>` markup) as empty deltas when token ids were requested, and skips them otherwise. Such chunks are
 * dropped for a harness that did not ask for ids, so it receives the chunks it would have received directly.
 */
export function isTokenOnlyChunk(chunk: Json): boolean {
  if (chunk["usage"] != null) return false;
  const choices = chunk["choices"];
  if (!Array.isArray(choices) || choices.length === 0) return false;
  for (const choice of choices) {
    if (!isObject(choice)) return false;
    if (choice["finish_reason"] != null) return false;
    const delta = choice["delta"];
    if (!isObject(delta) || Object.keys(delta).length > 0) return false;
  }
  return true;
}
