// Gemini's routes name the model and the method in the path: `/v1beta/models/{model}:generateContent`,
// `:streamGenerateContent` (`?alt=sse` for server-sent events, else one JSON array streamed), `:countTokens`, and
// `GET /v1beta/models/{model}`. The stable `/v1/models/…:method` spelling is accepted too.
export const GEMINI_METHODS = ["generateContent", "streamGenerateContent", "countTokens"] as const;
export type GeminiMethod = (typeof GEMINI_METHODS)[number] | "get";

export interface GeminiRoute {
  model: string;
  method: GeminiMethod;
}

// A served model's name may hold '/' (`Qwen/Qwen3-8B`) or ':' (`qwen3:8b`): the method is what follows the last ':'.
const METHOD_ROUTE = /^\/v1(?:beta)?\/models\/(.+):([A-Za-z]+)$/;
const MODEL_ROUTE = /^\/v1beta\/models\/(.+)$/;

function modelName(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/** The Gemini route a request is for, or null when it is none (or a method rlgate does not serve). */
export function geminiRoute(method: string | undefined, routePath: string): GeminiRoute | null {
  if (method === "POST") {
    const match = METHOD_ROUTE.exec(routePath);
    const name = match && (GEMINI_METHODS as readonly string[]).includes(match[2]!) ? modelName(match[1]!) : null;
    return name ? { model: name, method: match![2] as GeminiMethod } : null;
  }
  if (method === "GET") {
    const match = MODEL_ROUTE.exec(routePath);
    const name = match && modelName(match[1]!);
    return name ? { model: name, method: "get" } : null;
  }
  return null;
}

/** Routes answered in Google's error shape: anything under Gemini's API version prefixes' model routes. */
export function isGeminiPath(routePath: string): boolean {
  return routePath.startsWith("/v1beta/") || METHOD_ROUTE.test(routePath);
}

/** `alt=sse`: server-sent events; any other `alt` (or none) streams a JSON array. */
export function wantsSse(url: string | undefined): boolean {
  const at = (url ?? "").indexOf("?");
  return at >= 0 && new URLSearchParams((url ?? "").slice(at + 1)).get("alt") === "sse";
}
