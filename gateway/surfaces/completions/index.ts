// POST /v1/completions: forwarded with token ids and logprobs requested (choice-level `prompt_token_ids` /
// `token_ids`, `logprobs.token_logprobs`), captured, and given back as the upstream would have sent it.
import type { GatewayContext } from "../../context.ts";
import type { HarnessCall } from "../../relay/exchange.ts";
import { handleNative } from "../../relay/native.ts";
import { parseCompletionRequest } from "./request.ts";

export async function handleCompletions(ctx: GatewayContext, call: HarnessCall): Promise<void> {
  const request = parseCompletionRequest(call.body);
  await handleNative(
    ctx,
    call,
    { api: "completions", upstreamPath: "/v1/completions", codec: ctx.flavor.completions },
    request,
  );
}
