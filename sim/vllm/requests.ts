// Request bodies vLLM accepts on the routes the sim serves. Unknown fields pass through (vLLM accepts and ignores
// them); the ones the sim acts on are checked as vLLM checks them, and failures become 400 BadRequestError.
import { z } from "zod";
import { badRequest } from "../reply.ts";

const int = z.number().int();
const stop = z.union([z.string(), z.array(z.string())]).nullish();

const streamOptions = z
  .object({ include_usage: z.boolean().nullish(), continuous_usage_stats: z.boolean().nullish() })
  .passthrough()
  .nullish();

const sampling = {
  model: z.string().nullish(),
  n: int.min(1).max(128).nullish(),
  seed: int.nullish(),
  stream: z.boolean().nullish(),
  stream_options: streamOptions,
  stop,
  stop_token_ids: z.array(int).nullish(),
  include_stop_str_in_output: z.boolean().nullish(),
  return_token_ids: z.boolean().nullish(),
};

const message = z
  .object({
    role: z.string(),
    content: z.union([z.string(), z.array(z.object({ type: z.string() }).passthrough())]).nullish(),
  })
  .passthrough();

export const chatRequest = z
  .object({
    ...sampling,
    messages: z.array(message).min(1),
    max_tokens: int.nullish(),
    max_completion_tokens: int.nullish(),
    logprobs: z.boolean().nullish(),
    top_logprobs: int.min(0).nullish(),
    tools: z.array(z.object({}).passthrough()).nullish(),
    tool_choice: z.union([z.string(), z.object({}).passthrough()]).nullish(),
    chat_template_kwargs: z.record(z.unknown()).nullish(),
    include_reasoning: z.boolean().nullish(),
  })
  .passthrough();

export type ChatRequest = z.infer<typeof chatRequest>;

const promptInput = z.union([z.string(), z.array(z.string()), z.array(int), z.array(z.array(int))]);

export const completionRequest = z
  .object({
    ...sampling,
    prompt: promptInput,
    // vLLM's CompletionRequest defaults max_tokens to 16.
    max_tokens: int.nullish().default(16),
    logprobs: int.min(0).nullish(),
    prompt_logprobs: int.min(0).nullish(),
    echo: z.boolean().nullish(),
  })
  .passthrough();

export type CompletionRequest = z.infer<typeof completionRequest>;

export const tokenizeChatRequest = z
  .object({
    model: z.string().nullish(),
    messages: z.array(message),
    tools: z.array(z.object({}).passthrough()).nullish(),
    add_generation_prompt: z.boolean().nullish(),
    continue_final_message: z.boolean().nullish(),
    chat_template_kwargs: z.record(z.unknown()).nullish(),
    return_token_strs: z.boolean().nullish(),
  })
  .passthrough();

export const tokenizeTextRequest = z
  .object({ model: z.string().nullish(), prompt: z.string(), return_token_strs: z.boolean().nullish() })
  .passthrough();

export const detokenizeRequest = z.object({ model: z.string().nullish(), tokens: z.array(int) }).passthrough();

export function parseBody<T extends z.ZodTypeAny>(schema: T, body: unknown): z.infer<T> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => `${issue.path.join(".") || "body"}: ${issue.message}`);
  throw badRequest(`Invalid request: ${issues.join("; ")}`);
}

/** `stop` as a list. */
export function stopList(value: string | string[] | null | undefined): string[] {
  if (value == null) return [];
  return typeof value === "string" ? [value] : value;
}
