// Captures a streamed chat completion's per-choice token ids and logprobs from its chunks, and folds the chunks into
// one chat.completion-shaped object when a whole response is asked for (store/stream-response.ts: the fold a stored
// stream is read with). vLLM sends prompt_token_ids on the first chunk only; each chunk's token_ids is that chunk's
// delta, so the concatenation over chunks is the sampled sequence.
import type { ChoiceCapture } from "../../../store/records.ts";
import { foldChatChunks } from "../../../store/stream-response.ts";
import { chatLogprobEntries, chatLogprobs, choicesOf, logprobOf, numberArray } from "../../upstream/fields.ts";
import type { Captured, StreamAssembler } from "../../upstream/flavor.ts";
import { routedPayloads, type RoutedPayload } from "../../upstream/routed-experts.ts";
import { chatEntropies } from "../../branching/entropy.ts";

type Json = Record<string, unknown>;

interface ChoiceState {
  index: number;
  tokenIds: number[];
  logprobs: number[] | null;
  /** Per sampled token, when the upstream listed top alternatives (gateway/branching/entropy.ts). */
  entropies: number[] | null;
  finishReason: string | null;
}

/** Whether a delta carried text or tool calls (for time-to-first-token). */
function deltaCarries(delta: Json): boolean {
  const content = delta["content"];
  if (typeof content === "string" && content.length) return true;
  const reasoning = delta["reasoning_content"] ?? delta["reasoning"];
  if (typeof reasoning === "string" && reasoning.length) return true;
  const calls = delta["tool_calls"];
  return Array.isArray(calls) && calls.length > 0;
}

export class ChatStreamAssembler implements StreamAssembler {
  promptTokenIds: number[] | null = null;
  readonly routedExperts: RoutedPayload[] = [];
  #choices = new Map<number, ChoiceState>();
  // Folded into the whole response only when it is asked for (a call's record, a translated surface).
  readonly #chunks: Json[] = [];
  #sawTokens = false;
  readonly #entropies: boolean;

  constructor(options: { entropies?: boolean } = {}) {
    this.#entropies = options.entropies ?? true;
  }

  /**
   * Adds one parsed chunk; returns true if it carried sampled tokens or text (for time-to-first-token). A `scanned`
   * chunk's layout has no routed experts: their five look-ups of absent keys were ~10 µs of a 43-chunk stream.
   */
  add(chunk: Json, scanned = false): boolean {
    this.#chunks.push(chunk);
    const prompt = numberArray(chunk["prompt_token_ids"]);
    if (prompt && this.promptTokenIds === null) this.promptTokenIds = prompt;
    if (!scanned) for (const payload of routedPayloads(chunk)) this.routedExperts.push(payload);
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
        state.logprobs ??= [];
        for (const entry of entries) state.logprobs.push(logprobOf(entry));
        const entropies = this.#entropies ? chatEntropies(entries) : null;
        if (entropies) (state.entropies ??= []).push(...entropies);
      }
      const delta = choice["delta"];
      if (typeof delta === "object" && delta !== null && deltaCarries(delta as Json)) carried = true;
      if (typeof choice["finish_reason"] === "string") state.finishReason = choice["finish_reason"];
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
      state = { index, tokenIds: [], logprobs: null, entropies: null, finishReason: null };
      this.#choices.set(index, state);
    }
    return state;
  }

  /** The captured choices, ordered by index. */
  captures(): ChoiceCapture[] {
    return [...this.#choices.values()]
      .sort((a, b) => a.index - b.index)
      .map((s) => ({
        index: s.index,
        tokenIds: s.tokenIds,
        logprobs: s.logprobs,
        ...(s.entropies ? { entropies: s.entropies } : {}),
        finishReason: s.finishReason,
      }));
  }

  /** One chat.completion object equivalent to the stream the harness received (before field stripping). */
  assembled(): Json {
    return foldChatChunks(this.#chunks);
  }
}

/** Captures from a non-streamed chat response: prompt ids top-level (vLLM) or on the choices (SGLang). */
export function captureChatResponse(response: Json): Captured {
  const choices = choicesOf(response);
  const captures: ChoiceCapture[] = choices.map((raw, i) => {
    const entries = chatLogprobEntries(raw);
    const entropies = entries ? chatEntropies(entries) : null;
    return {
      index: typeof raw["index"] === "number" ? raw["index"] : i,
      tokenIds: numberArray(raw["token_ids"]) ?? [],
      logprobs: chatLogprobs(raw),
      ...(entropies ? { entropies } : {}),
      finishReason: typeof raw["finish_reason"] === "string" ? raw["finish_reason"] : null,
    };
  });
  const promptTokenIds = numberArray(response["prompt_token_ids"]) ?? numberArray(choices[0]?.["prompt_token_ids"]);
  const routedExperts = routedPayloads(response);
  return { promptTokenIds, choices: captures, ...(routedExperts.length ? { routedExperts } : {}) };
}
