// The upstream's context length, read once from its model card (`GET /v1/models`: vLLM and SGLang report
// `max_model_len`). A token-mode call without max_tokens needs it: /v1/completions defaults to 16 tokens where a chat
// call runs to the end of the context.
import type { GatewayContext } from "../context.ts";
import { upstreamRequestHeaders } from "../headers.ts";

const known = new WeakMap<object, Promise<number | null>>();

async function fetchContextLength(ctx: Pick<GatewayContext, "upstream" | "log">): Promise<number | null> {
  const { upstream } = ctx;
  try {
    const response = await upstream.request({
      method: "GET",
      path: "/v1/models",
      headers: upstreamRequestHeaders({}, { dropAuthorization: true, apiKey: upstream.apiKey, controlToken: null }),
    });
    const body = (await response.body.json()) as { data?: Array<{ max_model_len?: unknown }> };
    const length = body.data?.[0]?.max_model_len;
    return response.statusCode === 200 && typeof length === "number" && length > 0 ? length : null;
  } catch (error) {
    ctx.log.warn({ err: error }, "tokens prompt mode: could not read the upstream's context length from /v1/models");
    return null;
  }
}

export function upstreamContextLength(ctx: Pick<GatewayContext, "upstream" | "log">): Promise<number | null> {
  let length = known.get(ctx.upstream);
  if (!length) {
    length = fetchContextLength(ctx);
    // A failed read is tried again on a later call (the upstream may have been starting).
    void length.then((value) => value === null && known.delete(ctx.upstream));
    known.set(ctx.upstream, length);
  }
  return length;
}
