// Assembles a streamed text completion into one text_completion-shaped record and collects per-choice token ids and
// logprobs. Both vLLM and SGLang put `prompt_token_ids` on each choice's first chunk and each chunk's `token_ids` is
// that chunk's delta; `logprobs` arrays (tokens, token_logprobs, top_logprobs, text_offset) are per-chunk slices.
import type { ChoiceCapture } from "../../../store/records.ts";
import { choicesOf, completionLogprobs, isObject, numberArray, type Json } from "../../upstream/fields.ts";
import type { Captured, StreamAssembler } from "../../upstream/flavor.ts";
import { routedPayloads, type RoutedPayload } from "../../upstream/routed-experts.ts";

const LOGPROB_ARRAYS = ["text_offset", "token_logprobs", "tokens", "top_logprobs"] as const;

interface ChoiceState {
  index: number;
  text: string;
  promptTokenIds: number[] | null;
  tokenIds: number[];
  logprobs: Record<(typeof LOGPROB_ARRAYS)[number], unknown[]> | null;
  finishReason: string | null;
  stopReason: unknown;
}

export class CompletionStreamAssembler implements StreamAssembler {
  readonly routedExperts: RoutedPayload[] = [];
  #choices = new Map<number, ChoiceState>();
  #head: Json | null = null;
  #usage: unknown = null;

  add(chunk: Json): boolean {
    this.#head ??= chunk;
    if (chunk["usage"] != null) this.#usage = chunk["usage"];
    for (const payload of routedPayloads(chunk)) this.routedExperts.push(payload);
    let carried = false;
    choicesOf(chunk).forEach((choice, position) => {
      const index = typeof choice["index"] === "number" ? choice["index"] : position;
      let state = this.#choices.get(index);
      if (!state) {
        state = {
          index,
          text: "",
          promptTokenIds: null,
          tokenIds: [],
          logprobs: null,
          finishReason: null,
          stopReason: null,
        };
        this.#choices.set(index, state);
      }
      const prompt = numberArray(choice["prompt_token_ids"]);
      if (prompt && state.promptTokenIds === null) state.promptTokenIds = prompt;
      const ids = numberArray(choice["token_ids"]);
      if (ids?.length) {
        for (const id of ids) state.tokenIds.push(id);
        carried = true;
      }
      if (typeof choice["text"] === "string" && choice["text"].length) {
        state.text += choice["text"];
        carried = true;
      }
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
    });
    return carried;
  }

  #sorted(): ChoiceState[] {
    return [...this.#choices.values()].sort((a, b) => a.index - b.index);
  }

  get promptTokenIds(): number[] | null {
    return this.#sorted()[0]?.promptTokenIds ?? null;
  }

  captures(): ChoiceCapture[] {
    return this.#sorted().map((s) => ({
      index: s.index,
      tokenIds: s.tokenIds,
      logprobs: s.logprobs ? completionLogprobs({ logprobs: s.logprobs }) : null,
      finishReason: s.finishReason,
    }));
  }

  assembled(): Json {
    const head = this.#head ?? {};
    return {
      id: head["id"] ?? null,
      object: "text_completion",
      created: head["created"] ?? null,
      model: head["model"] ?? null,
      choices: this.#sorted().map((s) => ({
        index: s.index,
        text: s.text,
        logprobs: s.logprobs,
        finish_reason: s.finishReason,
        stop_reason: s.stopReason,
        prompt_token_ids: s.promptTokenIds,
        token_ids: s.tokenIds,
      })),
      usage: this.#usage,
    };
  }
}

/** Captures from a non-streamed completion: choice-level ids on both vLLM and SGLang. */
export function captureCompletionResponse(response: Json): Captured {
  const choices = choicesOf(response);
  return {
    promptTokenIds: numberArray(choices[0]?.["prompt_token_ids"]),
    choices: choices.map((raw, i) => ({
      index: typeof raw["index"] === "number" ? raw["index"] : i,
      tokenIds: numberArray(raw["token_ids"]) ?? [],
      logprobs: completionLogprobs(raw),
      finishReason: typeof raw["finish_reason"] === "string" ? raw["finish_reason"] : null,
    })),
    ...routedOf(response),
  };
}

function routedOf(response: Json): Pick<Captured, "routedExperts"> {
  const routedExperts = routedPayloads(response);
  return routedExperts.length ? { routedExperts } : {};
}
