// POST /v1/chat/completions: attribute → parse → forward (with token ids and logprobs requested) → capture → respond.
// The upstream flavour decides what is added to the request and stripped from the response; the native relay streams
// the answer back and commits the record before the harness's last byte.
import type { GatewayContext } from "../../context.ts";
import type { HarnessCall } from "../../relay/exchange.ts";
import { handleNative } from "../../relay/native.ts";
import { parseChatRequest } from "./request.ts";

export type { HarnessCall as ChatCall } from "../../relay/exchange.ts";

export async function handleChatCompletions(ctx: GatewayContext, call: HarnessCall): Promise<void> {
  const request = parseChatRequest(call.body);
  await handleNative(ctx, call, { api: "chat.completions", upstreamPath: "/v1/chat/completions", codec: ctx.flavor.chat }, request);
}
