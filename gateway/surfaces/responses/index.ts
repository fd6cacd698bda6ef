// POST /v1/responses: the Responses request is translated to a chat completion (with token ids and logprobs
// requested), captured like any chat call, and its answer translated back to a Response, streamed event by event.
// `previous_response_id` is served from the conversation history (history.ts: recent ones in memory, others rebuilt
// from the stored calls, so a chain can continue on any gateway worker).
import type { GatewayContext } from "../../context.ts";
import { GatewayError } from "../../errors.ts";
import { runChatCall } from "../../prompts/index.ts";
import { checkRolloutRequired, type HarnessCall } from "../../relay/exchange.ts";
import { relayTranslated } from "../../relay/translated.ts";
import type { Json } from "../../upstream/fields.ts";
import { capMaxTokens } from "../../upstream/max-tokens-cap.ts";
import { withServedModel } from "../../upstream/model-map.ts";
import { ResponsesEncoder } from "./encoder.ts";
import { responseHistory } from "./history.ts";
import { parseResponsesRequest, toChatRequest } from "./request.ts";

export async function handleResponses(ctx: GatewayContext, call: HarnessCall): Promise<void> {
  const request = parseResponsesRequest(call.body);
  checkRolloutRequired(ctx, call.attribution);
  const history = responseHistory(ctx);
  let previous: readonly Json[] = [];
  if (request.previous_response_id) {
    const found = history.find(call.attribution.rolloutId, request.previous_response_id);
    if (!found) {
      throw new GatewayError(
        "RLGATE_BAD_REQUEST",
        `Previous response with id '${request.previous_response_id}' not found (rlgate finds the responses of this rollout's stored calls; it may have been created with store: false, in another rollout, or have failed).`,
        { param: "previous_response_id" },
      );
    }
    previous = found;
  }
  const { chat, conversation, tools, warnings } = toChatRequest(request, previous);
  const stream = request.stream === true;
  const encoder = new ResponsesEncoder(request, tools);
  const { chat: upstreamChat, cap } = await capMaxTokens(ctx, withServedModel(ctx.modelMap, chat));
  const spec = {
    api: "responses" as const,
    stream,
    model: request.model,
    chat: upstreamChat,
    warnings,
    maxTokensCap: cap,
  };
  await runChatCall(ctx, call, spec, ({ ex }) =>
    relayTranslated(ex, {
      encoder,
      errorShape: "openai",
      stream,
      onComplete(delivered) {
        history.remember(encoder.id, request, conversation, delivered["output"], tools);
      },
    }),
  );
}
