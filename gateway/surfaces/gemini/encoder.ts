// Writes Gemini GenerateContentResponses from the upstream's chat chunks: streamed, one response per upstream chunk
// that adds parts (server-sent events `data: {…}\r\n\r\n` with `alt=sse`, else the elements of one JSON array, as
// Google streams them), and, from the same events, the whole response a generateContent call returns.
//   reasoning → `{text, thought: true}` parts (only when the client asked with thinkingConfig.includeThoughts); text →
//   `{text}` parts; a tool call → one `{functionCall: {id, name, args}}` part once its arguments are complete (Gemini
//   never streams partial arguments). The first other part after reasoning carries a `thoughtSignature` that holds
//   the reasoning (translate/carried-reasoning.ts), so a history that keeps the signature re-renders what the model
//   sampled even when it drops the thought parts.
//   finish_reason length → MAX_TOKENS; stop, tool_calls, a stop string → STOP; content_filter → SAFETY; else OTHER.
//   usageMetadata: candidatesTokenCount excludes thoughtsTokenCount, as Google counts; thoughtsTokenCount is given when
//   the upstream sent each reasoning chunk's token ids (vLLM streams them).
import type { TranslationEncoder } from "../../relay/translated.ts";
import { reasoningSignature } from "../../translate/carried-reasoning.ts";
import {
  ChatBlockSplitter,
  argumentsObject,
  randomHex,
  type BlockEvent,
  type ChatEnd,
} from "../../translate/blocks.ts";
import { choicesOf, isObject, numberArray, type Json } from "../../upstream/fields.ts";
import { googleErrorBody } from "../../errors.ts";

export type GeminiFraming = "sse" | "json-array";

export interface GeminiAnswerOptions {
  /** The model name the client asked for, echoed as `modelVersion`. */
  model: string;
  candidates: number;
  includeThoughts: boolean;
  framing: GeminiFraming;
}

const FINISH: Record<string, string> = {
  stop: "STOP",
  tool_calls: "STOP",
  length: "MAX_TOKENS",
  content_filter: "SAFETY",
};

function finishReason(end: ChatEnd): string {
  return (end.finishReason !== null && FINISH[end.finishReason]) || "OTHER";
}

/** One candidate's state: its splitter, the parts delivered so far and what a part in progress holds. */
class Candidate {
  readonly splitter: ChatBlockSplitter;
  /** Every part delivered, consecutive text of one kind merged: the whole response's content. */
  readonly parts: Json[] = [];
  #reasoning = "";
  #signed = false;
  #tool: { id: string; name: string; args: string } | null = null;

  constructor(index: number) {
    this.splitter = new ChatBlockSplitter(index);
  }

  /** The parts these events add, consecutive text of one kind in one part. */
  partsOf(events: readonly BlockEvent[], includeThoughts: boolean): Json[] {
    const out: Json[] = [];
    for (const event of events) {
      if (event.type === "start") {
        if (event.kind === "tool") this.#tool = { id: event.id, name: event.name, args: "" };
        continue;
      }
      if (event.kind === "tool") {
        if (event.type === "delta") this.#tool!.args += event.text;
        else {
          const { id, name, args } = this.#tool!;
          this.#add(out, { functionCall: { id, name, args: argumentsObject(args) } });
          this.#tool = null;
        }
        continue;
      }
      if (event.type !== "delta") continue;
      if (event.kind === "reasoning") {
        this.#reasoning += event.text;
        if (includeThoughts) this.#add(out, { text: event.text, thought: true });
      } else this.#add(out, { text: event.text });
    }
    return out;
  }

  #add(out: Json[], part: Json): void {
    if (part["thought"] !== true && !this.#signed && this.#reasoning) {
      part["thoughtSignature"] = reasoningSignature(this.#reasoning);
      this.#signed = true;
    }
    mergeInto(out, part);
    mergeInto(this.parts, { ...part });
  }
}

/** Appends a part, or its text to the last part when both are text of one kind (and the new one has no signature). */
function mergeInto(parts: Json[], part: Json): void {
  const last = parts[parts.length - 1];
  const text = typeof part["text"] === "string";
  if (
    last &&
    text &&
    typeof last["text"] === "string" &&
    last["thought"] === part["thought"] &&
    part["thoughtSignature"] === undefined
  ) {
    last["text"] = String(last["text"]) + String(part["text"]);
    return;
  }
  parts.push(part);
}

export class GeminiEncoder implements TranslationEncoder {
  readonly #options: GeminiAnswerOptions;
  readonly #candidates: Candidate[];
  readonly #responseId = randomHex(22);
  #framesWritten = 0;
  /** Tokens of reasoning chunks, while every such chunk carried its ids (null: unknown). */
  #thoughtTokens: number | null = 0;
  #ends: ChatEnd[] | null = null;

  constructor(options: GeminiAnswerOptions) {
    this.#options = options;
    this.#candidates = Array.from({ length: Math.max(1, options.candidates) }, (_, i) => new Candidate(i));
  }

  setPromptTokens(count: number | null): void {
    for (const candidate of this.#candidates) candidate.splitter.promptTokens = count;
  }

  chunk(chunk: Json): string {
    this.#countThoughts(chunk);
    const candidates: Json[] = [];
    this.#candidates.forEach((candidate, index) => {
      const parts = candidate.partsOf(candidate.splitter.push(chunk), this.#options.includeThoughts);
      if (parts.length) candidates.push({ content: { parts, role: "model" }, index });
    });
    return candidates.length ? this.#frame(this.#response(candidates, this.#partialUsage())) : "";
  }

  finish(): { frames: string; last: string } {
    const ends: ChatEnd[] = [];
    const candidates = this.#candidates.map((candidate, index) => {
      const { events, end } = candidate.splitter.end();
      ends.push(end);
      const parts = candidate.partsOf(events, this.#options.includeThoughts);
      const out: Json = parts.length ? { content: { parts, role: "model" } } : {};
      return { ...out, finishReason: finishReason(end), index };
    });
    this.#ends = ends;
    const last = this.#frame(this.#response(candidates, this.#usage()));
    return { frames: "", last: this.#options.framing === "json-array" ? `${last}\n]` : last };
  }

  snapshot(): Json {
    const candidates = this.#candidates.map((candidate, index) => {
      const out: Json = { content: { parts: structuredClone(candidate.parts), role: "model" } };
      if (this.#ends) out["finishReason"] = finishReason(this.#ends[index]!);
      out["index"] = index;
      return out;
    });
    return this.#response(candidates, this.#ends ? this.#usage() : this.#partialUsage());
  }

  /**
   * An SSE stream's failure is Google's error object on its own, unframed: @google/genai reads a stream chunk that
   * parses as `{error:{code}}` as an ApiError (a `data:` event holding it would reach the client as an empty answer).
   */
  failureFrame(message: string): string {
    const error = googleErrorBody(500, `upstream failed mid-answer: ${message}`);
    if (this.#options.framing === "sse") return error;
    return `${this.#framesWritten++ === 0 ? "[" : "\n,\r\n"}${error}\n]`;
  }

  #response(candidates: Json[], usage: Json | null): Json {
    const out: Json = { candidates };
    if (usage) out["usageMetadata"] = usage;
    out["modelVersion"] = this.#options.model;
    out["responseId"] = this.#responseId;
    return out;
  }

  #frame(response: Json): string {
    const json = JSON.stringify(response);
    if (this.#options.framing === "sse") return `data: ${json}\r\n\r\n`;
    return `${this.#framesWritten++ === 0 ? "[" : "\n,\r\n"}${json}`;
  }

  #promptTokens(): number | null {
    return this.#candidates[0]!.splitter.promptTokens;
  }

  /** Mid-stream usage, as Google writes it before the end: the prompt only. */
  #partialUsage(): Json | null {
    const prompt = this.#promptTokens();
    return prompt === null ? null : { promptTokenCount: prompt, totalTokenCount: prompt };
  }

  #usage(): Json {
    const end = this.#ends![0]!;
    const prompt = end.promptTokens ?? 0;
    const completion = end.completionTokens ?? 0;
    const thoughts = this.#thoughtTokens !== null && this.#thoughtTokens > 0 ? this.#thoughtTokens : null;
    const usage: Json = {
      promptTokenCount: prompt,
      candidatesTokenCount: completion - (thoughts ?? 0),
      totalTokenCount: prompt + completion,
      promptTokensDetails: [{ modality: "TEXT", tokenCount: prompt }],
    };
    if (thoughts !== null) usage["thoughtsTokenCount"] = thoughts;
    return usage;
  }

  #countThoughts(chunk: Json): void {
    if (this.#thoughtTokens === null) return;
    for (const choice of choicesOf(chunk)) {
      const delta = isObject(choice["delta"]) ? choice["delta"] : isObject(choice["message"]) ? choice["message"] : {};
      const reasoning = delta["reasoning_content"] ?? delta["reasoning"];
      if (typeof reasoning !== "string" || !reasoning) continue;
      const ids = numberArray(choice["token_ids"]);
      this.#thoughtTokens = ids === null || isObject(choice["message"]) ? null : this.#thoughtTokens + ids.length;
      if (this.#thoughtTokens === null) return;
    }
  }
}
