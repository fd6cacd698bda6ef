// POST /v1/messages/count_tokens: the request is translated as /v1/messages would translate it and its prompt is
// counted with the real tokenizer and chat template (translate/count-prompt.ts). Nothing is recorded.
import type { GatewayContext } from "../../context.ts";
import type { HarnessCall } from "../../relay/exchange.ts";
import { answerPromptCount } from "../../translate/count-prompt.ts";
import { withServedModel } from "../../upstream/model-map.ts";
import { isAnthropicHeader } from "./index.ts";
import { parseMessagesRequest, toChatRequest } from "./request.ts";

export async function handleCountTokens(ctx: GatewayContext, call: HarnessCall): Promise<void> {
  const request = parseMessagesRequest(call.body, { countOnly: true });
  const chat = withServedModel(ctx.modelMap, toChatRequest({ ...request, stream: false }));
  await answerPromptCount(ctx, call, chat, {
    errorShape: "anthropic",
    omitHeader: isAnthropicHeader,
    body: (count) => ({ input_tokens: count }),
  });
}
