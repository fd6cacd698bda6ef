// Shared by the sim's tests: JSON and SSE requests over real sockets.
export type Json = Record<string, any>;

export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Json }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Json) : {} };
}

export interface SseResult {
  status: number;
  contentType: string | null;
  /** Parsed `data:` payloads, without the final [DONE]. */
  chunks: Json[];
  done: boolean;
  raw: string;
}

export async function postSse(url: string, body: unknown, headers: Record<string, string> = {}): Promise<SseResult> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const raw = await res.text();
  return { status: res.status, contentType: res.headers.get("content-type"), ...parseSse(raw), raw };
}

export function parseSse(raw: string): { chunks: Json[]; done: boolean } {
  const chunks: Json[] = [];
  let done = false;
  for (const event of raw.split("\n\n")) {
    if (!event.startsWith("data: ")) continue;
    const data = event.slice("data: ".length);
    if (data === "[DONE]") done = true;
    else chunks.push(JSON.parse(data) as Json);
  }
  return { chunks, done };
}

/** A streamed chat response put back together per choice, the way a client assembles it. */
export interface AssembledChoice {
  content: string;
  reasoning: string;
  toolCalls: { id?: string; name: string; arguments: string }[];
  tokenIds: number[];
  logprobs: Json[];
  finishReason: string | null;
  chunkCount: number;
}

export function assembleChat(chunks: Json[]): AssembledChoice[] {
  const out: AssembledChoice[] = [];
  for (const chunk of chunks) {
    for (const choice of chunk["choices"] as Json[]) {
      const c = (out[choice["index"]] ??= {
        content: "",
        reasoning: "",
        toolCalls: [],
        tokenIds: [],
        logprobs: [],
        finishReason: null,
        chunkCount: 0,
      });
      c.chunkCount++;
      const delta = choice["delta"] as Json;
      if (typeof delta["content"] === "string") c.content += delta["content"];
      if (typeof delta["reasoning"] === "string") c.reasoning += delta["reasoning"];
      for (const call of (delta["tool_calls"] as Json[] | undefined) ?? []) {
        const t = (c.toolCalls[call["index"]] ??= { name: "", arguments: "" });
        if (call["id"]) t.id = call["id"];
        if (call["function"]?.["name"]) t.name += call["function"]["name"];
        if (call["function"]?.["arguments"]) t.arguments += call["function"]["arguments"];
      }
      if (Array.isArray(choice["token_ids"])) c.tokenIds.push(...(choice["token_ids"] as number[]));
      if (choice["logprobs"]) c.logprobs.push(...(choice["logprobs"]["content"] as Json[]));
      if (choice["finish_reason"]) c.finishReason = choice["finish_reason"];
    }
  }
  return out;
}

export const SHELL_TOOL = {
  type: "function",
  function: {
    name: "bash",
    description: "Run a shell command",
    parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
  },
};

export const READ_TOOL = {
  type: "function",
  function: {
    name: "read_file",
    description: "Read a file",
    parameters: {
      type: "object",
      properties: {
        path: { type: "string" },
        limit: { type: "integer", minimum: 10 },
        mode: { type: "string", enum: ["text", "bytes"] },
      },
      required: ["path", "limit", "mode"],
    },
  },
};

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls until `check` holds (the sim counts aborts when the socket closes, a moment after the client gives up). */
export async function until(check: () => boolean, timeoutMs = 2000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await sleep(5);
  }
}
