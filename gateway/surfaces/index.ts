// The capture surfaces: the harness APIs rlgate records, found by method and route (the path under any base URL),
// with the API their calls are recorded under and the shape their errors take.
import type { ApiSurface } from "../../store/records.ts";
import type { GatewayContext } from "../context.ts";
import type { ErrorShape } from "../errors.ts";
import type { HarnessCall } from "../relay/exchange.ts";
import { handleChatCompletions } from "./chat/index.ts";
import { handleCompletions } from "./completions/index.ts";
import { geminiBranchView, handleGemini } from "./gemini/index.ts";
import { geminiRoute, isGeminiPath } from "./gemini/route.ts";
import { handleCountTokens } from "./messages/count-tokens.ts";
import { handleMessages } from "./messages/index.ts";
import { handleResponses } from "./responses/index.ts";

export interface Surface {
  handle: (ctx: GatewayContext, call: HarnessCall) => Promise<void>;
  api: ApiSurface;
  /**
   * Whether a branch rollout's call on this route may be answered from its backbone's recording (gateway/branching):
   * not for counting routes (nothing generated).
   */
  replayable: boolean;
  /** The call as branching reads it, where the request's path holds what the body does not (Gemini's model). */
  branchView?: (call: HarnessCall) => HarnessCall;
}

const BY_PATH: Record<string, Surface> = {
  "/v1/chat/completions": { handle: handleChatCompletions, api: "chat.completions", replayable: true },
  "/v1/completions": { handle: handleCompletions, api: "completions", replayable: true },
  "/v1/responses": { handle: handleResponses, api: "responses", replayable: true },
  "/v1/messages": { handle: handleMessages, api: "messages", replayable: true },
  "/v1/messages/count_tokens": { handle: handleCountTokens, api: "messages", replayable: false },
};

const GEMINI: Surface = { handle: handleGemini, api: "gemini", replayable: true, branchView: geminiBranchView };
const GEMINI_COUNT: Surface = { handle: handleGemini, api: "gemini", replayable: false };

/** The surface a POST to `routePath` is for, if any. */
export function surfaceFor(method: string | undefined, routePath: string): Surface | undefined {
  if (method !== "POST") return undefined;
  const found = BY_PATH[routePath];
  if (found) return found;
  const gemini = geminiRoute(method, routePath);
  return gemini === null ? undefined : gemini.method === "countTokens" ? GEMINI_COUNT : GEMINI;
}

/** Anthropic's routes answer errors in Anthropic's shape, Gemini's in Google's; every other route in OpenAI's. */
export function errorShapeOfRoute(routePath: string): ErrorShape {
  if (routePath === "/v1/messages" || routePath.startsWith("/v1/messages/")) return "anthropic";
  return isGeminiPath(routePath) ? "google" : "openai";
}
