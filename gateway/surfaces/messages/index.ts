// POST /v1/messages (Anthropic Messages; `?beta=true` and other query strings are accepted): the request is
// translated to a chat completion (with token ids and logprobs requested), captured like any chat call, and its
// answer translated back to a Message, streamed event by event. Errors take Anthropic's shape.
import type { GatewayContext } from "../../context.ts";
import { runChatCall } from "../../prompts/index.ts";
import { checkRolloutRequired, type HarnessCall } from "../../relay/exchange.ts";
import { relayTranslated } from "../../relay/translated.ts";
import { capMaxTokens } from "../../upstream/max-tokens-cap.ts";
import { withServedModel } from "../../upstream/model-map.ts";
import { MessagesEncoder } from "./encoder.ts";
import { parseMessagesRequest, toChatRequest } from "./request.ts";

/** Headers of Anthropic's API (its key, version and beta flags) mean nothing to a chat-completions upstream. */
export function isAnthropicHeader(name: string): boolean {
  return name === "x-api-key" || name.startsWith("anthropic-");
}

export async function handleMessages(ctx: GatewayContext, call: HarnessCall): Promise<void> {
  const request = parseMessagesRequest(call.body);
  checkRolloutRequired(ctx, call.attribution);
  const stream = request.stream === true;
  const warnings: string[] = [];
  const { chat, cap } = await capMaxTokens(ctx, withServedModel(ctx.modelMap, toChatRequest(request, warnings)));
  const spec = {
    api: "messages" as const,
    stream,
    model: request.model,
    chat,
    omitHeader: isAnthropicHeader,
    warnings,
    maxTokensCap: cap,
  };
  await runChatCall(ctx, call, spec, ({ ex }) =>
    relayTranslated(ex, { encoder: new MessagesEncoder(request.model), errorShape: "anthropic", stream }),
  );
}
