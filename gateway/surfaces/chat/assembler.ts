// Assembles a streamed chat completion into one chat.completion-shaped record, and collects per-choice token ids and
// logprobs from the chunks' deltas. vLLM sends prompt_token_ids on the first chunk only; each chunk's token_ids is
// that chunk's delta, so the concatenation over chunks is the sampled sequence.
import type { ChoiceCapture } from "../../../store/records.ts";
import { chatLogprobEntries, chatLogprobs, choicesOf, logprobOf, numberArray } from "../../upstream/fields.ts";
import type { Captured, StreamAssembler } from "../../upstream/flavor.ts";
import { routedPayloads, type RoutedPayload } from "../../upstream/routed-experts.ts";

type Json = Record<string, unknown>;

interface ToolCallParts {
  id?: string;
  type?: string;
  name: string;
  arguments: string;
}

interface ChoiceState {
  index: number;
  role: string;
  content: string | null;
  reasoning: string | null;
  toolCalls: Map<number, ToolCallParts>;
  tokenIds: number[];
  logprobs: number[];
  logprobsSeen: boolean;
  logprobEntries: unknown[];
  finishReason: string | null;
  stopReason: unknown;
}

export class ChatStreamAssembler implements StreamAssembler {
  promptTokenIds: number[] | null = null;
  readonly routedExperts: RoutedPayload[] = [];
  #choices = new Map<number, ChoiceState>();
  #head: Json | null = null;
  #usage: unknown = null;
  #sawTokens = false;

  /** Adds one parsed chunk; returns true if it carried sampled tokens or text (for time-to-first-token). */
  add(chunk: Json): boolean {
    this.#head ??= chunk;
    const prompt = numberArray(chunk["prompt_token_ids"]);
    if (prompt && this.promptTokenIds === null) this.promptTokenIds = prompt;
    if (chunk["usage"] != null) this.#usage = chunk["usage"];
    for (const payload of routedPayloads(chunk)) this.routedExperts.push(payload);
    const choices = chunk["choices"];
    let carried = false;
    if (!Array.isArray(choices)) return false;
    for (const raw of choices) {
      if (typeof raw !== "object" || raw === null) continue;
      const choice = raw as Json;
      const state = this.#state(typeof choice["index"] === "number" ? choice["index"] : 0);
      const ids = numberArray(choice["token_ids"]);
      if (ids && ids.length) {
        for (const id of ids) state.tokenIds.push(id);
        carried = true;
      }
      const entries = chatLogprobEntries(choice);
      if (entries) {
        state.logprobsSeen = true;
        for (const entry of entries) {
          state.logprobs.push(logprobOf(entry));
          state.logprobEntries.push(entry);
        }
      }
      const delta = choice["delta"];
      if (typeof delta === "object" && delta !== null) carried = this.#addDelta(state, delta as Json) || carried;
      if (typeof choice["finish_reason"] === "string") state.finishReason = choice["finish_reason"];
      if (choice["stop_reason"] !== undefined && choice["stop_reason"] !== null)
        state.stopReason = choice["stop_reason"];
    }
    if (carried) this.#sawTokens = true;
    return carried;
  }

  get sawTokens(): boolean {
    return this.#sawTokens;
  }

  #state(index: number): ChoiceState {
    let state = this.#choices.get(index);
    if (!state) {
      state = {
        index,
        role: "assistant",
        content: null,
        reasoning: null,
        toolCalls: new Map(),
        tokenIds: [],
        logprobs: [],
        logprobsSeen: false,
        logprobEntries: [],
        finishReason: null,
        stopReason: null,
      };
      this.#choices.set(index, state);
    }
    return state;
  }

  #addDelta(state: ChoiceState, delta: Json): boolean {
    let carried = false;
    if (typeof delta["role"] === "string") state.role = delta["role"];
    if (typeof delta["content"] === "string" && delta["content"].length) {
      state.content = (state.content ?? "") + delta["content"];
      carried = true;
    }
    const reasoning = delta["reasoning_content"] ?? delta["reasoning"];
    if (typeof reasoning === "string" && reasoning.length) {
      state.reasoning = (state.reasoning ?? "") + reasoning;
      carried = true;
    }
    if (Array.isArray(delta["tool_calls"])) {
      for (const raw of delta["tool_calls"] as Json[]) {
        const index = typeof raw["index"] === "number" ? raw["index"] : state.toolCalls.size;
        let call = state.toolCalls.get(index);
        if (!call) {
          call = { name: "", arguments: "" };
          state.toolCalls.set(index, call);
        }
        if (typeof raw["id"] === "string") call.id = raw["id"];
        if (typeof raw["type"] === "string") call.type = raw["type"];
        const fn = raw["function"] as Json | undefined;
        if (fn && typeof fn["name"] === "string") call.name += fn["name"];
        if (fn && typeof fn["arguments"] === "string") call.arguments += fn["arguments"];
        carried = true;
      }
    }
    return carried;
  }

  /** The captured choices, ordered by index. */
  captures(): ChoiceCapture[] {
    return [...this.#choices.values()]
      .sort((a, b) => a.index - b.index)
      .map((s) => ({
        index: s.index,
        tokenIds: s.tokenIds,
        logprobs: s.logprobsSeen ? s.logprobs : null,
        finishReason: s.finishReason,
      }));
  }

  /** One chat.completion object equivalent to the stream the harness received (before field stripping). */
  assembled(): Json {
    const head = this.#head ?? {};
    return {
      id: head["id"] ?? null,
      object: "chat.completion",
      created: head["created"] ?? null,
      model: head["model"] ?? null,
      choices: [...this.#choices.values()]
        .sort((a, b) => a.index - b.index)
        .map((s) => ({
          index: s.index,
          message: {
            role: s.role,
            content: s.content,
            reasoning_content: s.reasoning,
            tool_calls: [...s.toolCalls.entries()]
              .sort(([a], [b]) => a - b)
              .map(([, c]) => ({
                id: c.id,
                type: c.type ?? "function",
                function: { name: c.name, arguments: c.arguments },
              })),
          },
          logprobs: s.logprobsSeen ? { content: s.logprobEntries } : null,
          finish_reason: s.finishReason,
          stop_reason: s.stopReason,
        })),
      usage: this.#usage,
    };
  }
}

/** Captures from a non-streamed chat response: prompt ids top-level (vLLM) or on the choices (SGLang). */
export function captureChatResponse(response: Json): Captured {
  const choices = choicesOf(response);
  const captures: ChoiceCapture[] = choices.map((raw, i) => ({
    index: typeof raw["index"] === "number" ? raw["index"] : i,
    tokenIds: numberArray(raw["token_ids"]) ?? [],
    logprobs: chatLogprobs(raw),
    finishReason: typeof raw["finish_reason"] === "string" ? raw["finish_reason"] : null,
  }));
  const promptTokenIds = numberArray(response["prompt_token_ids"]) ?? numberArray(choices[0]?.["prompt_token_ids"]);
  const routedExperts = routedPayloads(response);
  return { promptTokenIds, choices: captures, ...(routedExperts.length ? { routedExperts } : {}) };
}
