// Validation of a chat-completions request body: only what rlgate relies on is checked; every other field is
// forwarded untouched so that the upstream stays the judge of its own parameters.
import { z } from "zod";
import { GatewayError } from "../../errors.ts";

const message = z
  .object({
    role: z.string({ required_error: "each message needs a 'role'" }),
  })
  .passthrough();

export const chatRequestSchema = z
  .object({
    model: z.string().optional(),
    messages: z.array(message, { required_error: "'messages' is required" }).min(1, "'messages' must not be empty"),
    stream: z.boolean().optional(),
    n: z.number().int().min(1).optional(),
    logprobs: z.boolean().nullable().optional(),
    top_logprobs: z.number().int().min(0).nullable().optional(),
    return_token_ids: z.boolean().nullable().optional(),
  })
  .passthrough();

export type ChatRequest = z.infer<typeof chatRequestSchema>;

export function parseChatRequest(body: unknown): ChatRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new GatewayError("RLGATE_BAD_REQUEST", "request body must be a JSON object");
  }
  const result = chatRequestSchema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const param = issue.path.join(".");
    throw new GatewayError("RLGATE_BAD_REQUEST", `invalid request: ${param ? `${param}: ` : ""}${issue.message}`, {
      param: param || undefined,
    });
  }
  return result.data;
}
