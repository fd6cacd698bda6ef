// A streamed call's response: the chunks of a chat or text completion stream folded into the one whole response they
// stand for. The gateway's stream assemblers fold the upstream's chunks with it, and the store folds the records of
// streamed calls that were kept as their events (store/call-codec.ts, StoredStream) when they are read.

type Json = Record<string, unknown>;

/** The `object` of the whole response a stream folds into. */
export type StreamObject = "chat.completion" | "text_completion";

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function numbers(value: unknown): number[] | null {
  if (!Array.isArray(value)) return null;
  for (const item of value) if (typeof item !== "number") return null;
  return value as number[];
}

function choicesOf(chunk: Json): Json[] {
  const choices = chunk["choices"];
  return Array.isArray(choices) ? (choices.filter(isObject) as Json[]) : [];
}

function indexOf(choice: Json, position: number): number {
  return typeof choice["index"] === "number" ? choice["index"] : position;
}

function head(chunks: readonly Json[]): Json {
  return chunks[0] ?? {};
}

/** The last usage object the stream carried (null when none). */
function usageOf(chunks: readonly Json[]): unknown {
  let usage: unknown = null;
  for (const chunk of chunks) if (chunk["usage"] != null) usage = chunk["usage"];
  return usage;
}

function byIndex<T extends { index: number }>(states: Map<number, T>): T[] {
  return [...states.values()].sort((a, b) => a.index - b.index);
}

interface ToolCallParts {
  id?: string;
  type?: string;
  name: string;
  arguments: string;
}

interface ChatChoice {
  index: number;
  role: string;
  content: string | null;
  reasoning: string | null;
  /** The name the stream carried reasoning under (vLLM >= 0.17: `reasoning`; older vLLM and SGLang: `reasoning_content`). */
  reasoningKey: "reasoning" | "reasoning_content";
  toolCalls: Map<number, ToolCallParts>;
  logprobEntries: unknown[] | null;
  finishReason: string | null;
  stopReason: unknown;
}

function addToolCalls(state: ChatChoice, calls: Json[]): void {
  for (const raw of calls) {
    const index = typeof raw["index"] === "number" ? raw["index"] : state.toolCalls.size;
    let call = state.toolCalls.get(index);
    if (!call) state.toolCalls.set(index, (call = { name: "", arguments: "" }));
    if (typeof raw["id"] === "string") call.id = raw["id"];
    if (typeof raw["type"] === "string") call.type = raw["type"];
    const fn = isObject(raw["function"]) ? raw["function"] : undefined;
    if (fn && typeof fn["name"] === "string") call.name += fn["name"];
    if (fn && typeof fn["arguments"] === "string") call.arguments += fn["arguments"];
  }
}

function addChatChoice(state: ChatChoice, choice: Json): void {
  const logprobs = choice["logprobs"];
  if (isObject(logprobs) && Array.isArray(logprobs["content"])) {
    state.logprobEntries ??= [];
    for (const entry of logprobs["content"] as unknown[]) state.logprobEntries.push(entry);
  }
  const delta = choice["delta"];
  if (isObject(delta)) {
    if (typeof delta["role"] === "string") state.role = delta["role"];
    if (typeof delta["content"] === "string" && delta["content"].length)
      state.content = (state.content ?? "") + delta["content"];
    const legacy = delta["reasoning_content"];
    const reasoning = legacy ?? delta["reasoning"];
    if (typeof reasoning === "string" && reasoning.length) {
      state.reasoning = (state.reasoning ?? "") + reasoning;
      if (typeof legacy !== "string") state.reasoningKey = "reasoning";
    }
    if (Array.isArray(delta["tool_calls"])) addToolCalls(state, delta["tool_calls"] as Json[]);
  }
  if (typeof choice["finish_reason"] === "string") state.finishReason = choice["finish_reason"];
  if (choice["stop_reason"] !== undefined && choice["stop_reason"] !== null) state.stopReason = choice["stop_reason"];
}

/** One chat.completion object equivalent to a chat stream's chunks. */
export function foldChatChunks(chunks: readonly Json[]): Json {
  const states = new Map<number, ChatChoice>();
  for (const chunk of chunks) {
    for (const choice of choicesOf(chunk)) {
      // A chat choice without an index is the first (the only one a stream without indexes can have).
      const index = indexOf(choice, 0);
      let state = states.get(index);
      if (!state) {
        state = {
          index,
          role: "assistant",
          content: null,
          reasoning: null,
          reasoningKey: "reasoning_content",
          toolCalls: new Map(),
          logprobEntries: null,
          finishReason: null,
          stopReason: null,
        };
        states.set(index, state);
      }
      addChatChoice(state, choice);
    }
  }
  const first = head(chunks);
  return {
    id: first["id"] ?? null,
    object: "chat.completion",
    created: first["created"] ?? null,
    model: first["model"] ?? null,
    choices: byIndex(states).map((s) => ({
      index: s.index,
      message: {
        role: s.role,
        content: s.content,
        [s.reasoningKey]: s.reasoning,
        tool_calls: [...s.toolCalls.entries()]
          .sort(([a], [b]) => a - b)
          .map(([, c]) => ({
            id: c.id,
            type: c.type ?? "function",
            function: { name: c.name, arguments: c.arguments },
          })),
      },
      logprobs: s.logprobEntries === null ? null : { content: s.logprobEntries },
      finish_reason: s.finishReason,
      stop_reason: s.stopReason,
    })),
    usage: usageOf(chunks),
  };
}

const LOGPROB_ARRAYS = ["text_offset", "token_logprobs", "tokens", "top_logprobs"] as const;

interface CompletionChoice {
  index: number;
  text: string;
  promptTokenIds: number[] | null;
  /** Null until a chunk carried `token_ids` as an array (a harness that did not ask for them got null). */
  tokenIds: number[] | null;
  logprobs: Record<(typeof LOGPROB_ARRAYS)[number], unknown[]> | null;
  finishReason: string | null;
  stopReason: unknown;
}

function addCompletionChoice(state: CompletionChoice, choice: Json): void {
  const prompt = numbers(choice["prompt_token_ids"]);
  if (prompt && state.promptTokenIds === null) state.promptTokenIds = prompt;
  const ids = numbers(choice["token_ids"]);
  if (ids) {
    state.tokenIds ??= [];
    for (const id of ids) state.tokenIds.push(id);
  }
  if (typeof choice["text"] === "string") state.text += choice["text"];
  const logprobs = choice["logprobs"];
  if (isObject(logprobs)) {
    state.logprobs ??= { text_offset: [], token_logprobs: [], tokens: [], top_logprobs: [] };
    for (const key of LOGPROB_ARRAYS) {
      const part = logprobs[key];
      if (Array.isArray(part)) for (const item of part) state.logprobs[key].push(item);
    }
  }
  if (typeof choice["finish_reason"] === "string") state.finishReason = choice["finish_reason"];
  if (choice["stop_reason"] != null) state.stopReason = choice["stop_reason"];
}

/** One text_completion object equivalent to a completion stream's chunks. */
export function foldCompletionChunks(chunks: readonly Json[]): Json {
  const states = new Map<number, CompletionChoice>();
  for (const chunk of chunks) {
    choicesOf(chunk).forEach((choice, position) => {
      const index = indexOf(choice, position);
      let state = states.get(index);
      if (!state) {
        state = {
          index,
          text: "",
          promptTokenIds: null,
          tokenIds: null,
          logprobs: null,
          finishReason: null,
          stopReason: null,
        };
        states.set(index, state);
      }
      addCompletionChoice(state, choice);
    });
  }
  const first = head(chunks);
  return {
    id: first["id"] ?? null,
    object: "text_completion",
    created: first["created"] ?? null,
    model: first["model"] ?? null,
    choices: byIndex(states).map((s) => ({
      index: s.index,
      text: s.text,
      logprobs: s.logprobs,
      finish_reason: s.finishReason,
      stop_reason: s.stopReason,
      prompt_token_ids: s.promptTokenIds,
      token_ids: s.tokenIds,
    })),
    usage: usageOf(chunks),
  };
}

/** The whole response of `object` that chunks fold into. */
export function foldChunks(chunks: readonly Json[], object: StreamObject): Json {
  return object === "chat.completion" ? foldChatChunks(chunks) : foldCompletionChunks(chunks);
}

/**
 * The chunks of a server-sent event stream's bytes: each event's `data:` lines joined and parsed; `[DONE]`, events that
 * are not JSON objects and error events (`{"error": …}`) are left out, as the gateway's relay leaves them out of
 * what it assembles.
 */
export function streamChunks(sse: Uint8Array): Json[] {
  const text = Buffer.from(sse.buffer, sse.byteOffset, sse.byteLength).toString("utf8");
  const chunks: Json[] = [];
  for (const event of text.split(/\r?\n\r?\n/)) {
    let data: string | null = null;
    for (const line of event.split(/\r?\n/)) {
      if (!line.startsWith("data:")) continue;
      const value = line.charCodeAt(5) === 0x20 ? line.slice(6) : line.slice(5);
      data = data === null ? value : `${data}\n${value}`;
    }
    if (data === null || data.trim() === "[DONE]") continue;
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      continue;
    }
    if (isObject(value) && (value["error"] === undefined || value["error"] === null)) chunks.push(value);
  }
  return chunks;
}

// Records kept as their events stored the head the events share (`data: {"id":…,"object":…,"created":…,"model":…,
// "choices":[`) once, and marked each event that started with it by a NUL byte.
const EVENT_END = Buffer.from("\n\n");
const MARK = 0;

/** A stored stream's events, each marked event given its head again. */
export function expandStream(compact: Uint8Array, head: Uint8Array): Buffer {
  const sse = Buffer.from(compact.buffer, compact.byteOffset, compact.byteLength);
  const pieces: Uint8Array[] = [];
  for (let start = 0; start < sse.length;) {
    const found = sse.indexOf(EVENT_END, start);
    const end = found < 0 ? sse.length : found + EVENT_END.length;
    if (sse[start] === MARK) pieces.push(head, sse.subarray(start + 1, end));
    else pieces.push(sse.subarray(start, end));
    start = end;
  }
  return Buffer.concat(pieces);
}
