// POST /v1/chat/completions: attribute → parse → forward (with token ids and logprobs requested; in tokens prompt
// mode as ids to /v1/completions, prompts/index.ts) → capture → respond.
// The upstream flavour decides what is added to the request and stripped from the response; the native relay streams
// the answer back and commits the record before the harness's last byte.
import type { GatewayContext } from "../../context.ts";
import { runChatCall } from "../../prompts/index.ts";
import { checkRolloutRequired, type HarnessCall } from "../../relay/exchange.ts";
import { relayNative } from "../../relay/native.ts";
import { capMaxTokens } from "../../upstream/max-tokens-cap.ts";
import { withServedModel } from "../../upstream/model-map.ts";
import { parseChatRequest } from "./request.ts";

export type { HarnessCall as ChatCall } from "../../relay/exchange.ts";

export async function handleChatCompletions(ctx: GatewayContext, call: HarnessCall): Promise<void> {
  const request = parseChatRequest(call.body);
  checkRolloutRequired(ctx, call.attribution);
  const stream = request["stream"] === true;
  const model = typeof request.model === "string" ? request.model : null;
  const { chat, cap } = await capMaxTokens(ctx, withServedModel(ctx.modelMap, request));
  await runChatCall(
    ctx,
    call,
    { api: "chat.completions", stream, model, chat, maxTokensCap: cap },
    ({ ex, codec, prepared }) => relayNative(ex, codec, prepared, request),
  );
}
