// Google's Gemini API (Gemini CLI, @google/genai): `POST …/models/{model}:generateContent` and
// `:streamGenerateContent` are translated to a chat completion (with token ids and logprobs requested), captured like
// any chat call, and answered as GenerateContentResponses, streamed chunk by chunk; `:countTokens` is counted with the
// real tokenizer; `GET …/models/{model}` describes the served model. Errors take Google's shape.
import type { GatewayContext } from "../../context.ts";
import { GatewayError } from "../../errors.ts";
import { upstreamContextLength } from "../../prompts/context-length.ts";
import { runChatCall } from "../../prompts/index.ts";
import { checkRolloutRequired, type HarnessCall } from "../../relay/exchange.ts";
import { relayTranslated } from "../../relay/translated.ts";
import { answerPromptCount } from "../../translate/count-prompt.ts";
import { isObject } from "../../upstream/fields.ts";
import { capMaxTokens } from "../../upstream/max-tokens-cap.ts";
import { withServedModel } from "../../upstream/model-map.ts";
import { GeminiEncoder } from "./encoder.ts";
import { candidateCount, includeThoughts, parseGeminiRequest, toChatRequest } from "./request.ts";
import { geminiRoute, wantsSse, type GeminiRoute } from "./route.ts";

/** Google's own headers (its API key, client tags) mean nothing to a chat-completions upstream. */
export function isGoogleHeader(name: string): boolean {
  return name.startsWith("x-goog-");
}

function routeOf(call: HarnessCall): GeminiRoute {
  const route = geminiRoute(call.req.method, call.attribution.routePath);
  if (!route) throw new GatewayError("RLGATE_NOT_FOUND", `no Gemini route ${call.attribution.routePath}`);
  return route;
}

export async function handleGemini(ctx: GatewayContext, call: HarnessCall): Promise<void> {
  const route = routeOf(call);
  if (route.method === "countTokens") return countTokens(ctx, call, route);
  const request = parseGeminiRequest(call.body);
  checkRolloutRequired(ctx, call.attribution);
  const stream = route.method === "streamGenerateContent";
  const warnings: string[] = [];
  const translated = toChatRequest(request, route.model, stream, warnings);
  const { chat, cap } = await capMaxTokens(ctx, withServedModel(ctx.modelMap, translated));
  const sse = wantsSse(call.req.url);
  const spec = {
    api: "gemini" as const,
    stream,
    model: route.model,
    chat,
    omitHeader: isGoogleHeader,
    warnings,
    maxTokensCap: cap,
  };
  const options = {
    model: route.model,
    candidates: candidateCount(request),
    includeThoughts: includeThoughts(request),
    framing: sse ? ("sse" as const) : ("json-array" as const),
  };
  await runChatCall(ctx, call, spec, ({ ex }) =>
    relayTranslated(ex, {
      encoder: new GeminiEncoder(options),
      errorShape: "google",
      stream,
      ...(sse ? {} : { streamContentType: "application/json; charset=UTF-8" }),
    }),
  );
}

/**
 * A Gemini call as branching reads it (gateway/branching): its body, which makes its identity as the backbone's
 * recorded bodies make theirs (the model and stream flag in the path are not part of it: a harness at the same point
 * sends the same), and the stream framing it asked for (`alt`), which its replay is written in.
 */
export function geminiBranchView(call: HarnessCall): HarnessCall {
  if (!isObject(call.body)) return call;
  return { ...call, body: { ...call.body, alt: wantsSse(call.req.url) ? "sse" : null } };
}

/** countTokens takes `contents` alone, or a whole `generateContentRequest` (system instruction and tools counted). */
async function countTokens(ctx: GatewayContext, call: HarnessCall, route: GeminiRoute): Promise<void> {
  const body = call.body;
  const inner = isObject(body) && isObject(body["generateContentRequest"]) ? body["generateContentRequest"] : body;
  const request = parseGeminiRequest(inner);
  const chat = withServedModel(ctx.modelMap, toChatRequest(request, route.model, false));
  await answerPromptCount(ctx, call, chat, {
    errorShape: "google",
    omitHeader: isGoogleHeader,
    body: (count) => ({ totalTokens: count, promptTokensDetails: [{ modality: "TEXT", tokenCount: count }] }),
  });
}

/** `GET …/models/{model}`: the model as Gemini describes one, its limits from the upstream's context length. */
export async function describeGeminiModel(
  ctx: GatewayContext,
  call: Pick<HarnessCall, "res">,
  model: string,
): Promise<void> {
  const context = await upstreamContextLength(ctx);
  const body = JSON.stringify({
    name: `models/${model}`,
    version: "rlgate",
    displayName: model,
    description: `served by rlgate as ${withServedModel(ctx.modelMap, { model })["model"] as string}`,
    ...(context === null ? {} : { inputTokenLimit: context, outputTokenLimit: context }),
    supportedGenerationMethods: ["generateContent", "streamGenerateContent", "countTokens"],
    thinking: true,
  });
  call.res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  call.res.end(body);
}
