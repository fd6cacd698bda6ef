// Captures a streamed text completion's per-choice token ids and logprobs, and folds its chunks into one
// text_completion-shaped object when a whole response is asked for (store/stream-response.ts). Both vLLM and SGLang
// put `prompt_token_ids` on each choice's first chunk and each chunk's `token_ids` is that chunk's delta; `logprobs`
// arrays (tokens, token_logprobs, top_logprobs, text_offset) are per-chunk slices.
import type { ChoiceCapture } from "../../../store/records.ts";
import { foldCompletionChunks } from "../../../store/stream-response.ts";
import { choicesOf, completionLogprobs, isObject, numberArray, type Json } from "../../upstream/fields.ts";
import type { Captured, StreamAssembler } from "../../upstream/flavor.ts";
import { routedPayloads, type RoutedPayload } from "../../upstream/routed-experts.ts";

interface ChoiceState {
  index: number;
  promptTokenIds: number[] | null;
  tokenIds: number[];
  /** Each chunk's `logprobs.token_logprobs`, joined (null until a chunk carried logprobs). */
  logprobs: unknown[] | null;
  finishReason: string | null;
}

export class CompletionStreamAssembler implements StreamAssembler {
  readonly routedExperts: RoutedPayload[] = [];
  #choices = new Map<number, ChoiceState>();
  // Folded into the whole response only when it is asked for (a call's record, a translated surface).
  readonly #chunks: Json[] = [];

  add(chunk: Json): boolean {
    this.#chunks.push(chunk);
    for (const payload of routedPayloads(chunk)) this.routedExperts.push(payload);
    let carried = false;
    choicesOf(chunk).forEach((choice, position) => {
      const index = typeof choice["index"] === "number" ? choice["index"] : position;
      let state = this.#choices.get(index);
      if (!state) {
        state = { index, promptTokenIds: null, tokenIds: [], logprobs: null, finishReason: null };
        this.#choices.set(index, state);
      }
      const prompt = numberArray(choice["prompt_token_ids"]);
      if (prompt && state.promptTokenIds === null) state.promptTokenIds = prompt;
      const ids = numberArray(choice["token_ids"]);
      if (ids?.length) {
        for (const id of ids) state.tokenIds.push(id);
        carried = true;
      }
      if (typeof choice["text"] === "string" && choice["text"].length) carried = true;
      const logprobs = choice["logprobs"];
      if (isObject(logprobs)) {
        state.logprobs ??= [];
        const part = logprobs["token_logprobs"];
        if (Array.isArray(part)) for (const item of part) state.logprobs.push(item);
      }
      if (typeof choice["finish_reason"] === "string") state.finishReason = choice["finish_reason"];
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
      logprobs: s.logprobs ? completionLogprobs({ logprobs: { token_logprobs: s.logprobs } }) : null,
      finishReason: s.finishReason,
    }));
  }

  assembled(): Json {
    return foldCompletionChunks(this.#chunks);
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
