// A token-mode call's answer in the chat-completions API: the upstream's /v1/completions response (sampled ids and
// their text) parsed with the served model's output parsers — the ones the sim's chat route uses — into the
// chat.completion (or chat.completion.chunk stream) a vLLM chat route would have sent, token ids and logprobs
// included as rlgate requests them there. Everything downstream (capture, stripping for the harness, the Messages
// and Responses translators) reads it as it reads an upstream chat answer.
//
// Streams: text and reasoning go out token by token as they arrive (one token behind, so the last token's chunk
// carries the finish reason as vLLM's does); from where a tool call may open (`<tool_call>`, or a Llama answer's first
// `{`: the family's tool syntax says) tokens are held until the end of the generation, when the whole text tells
// whether every call is well formed — the same decision vLLM's parser makes — and their chunks follow with the same
// deltas the sim's chat route sends for those ids.
import type { ReasoningField } from "../../tokenizer/reasoning-field.ts";
import { randomUUID } from "node:crypto";
import type { ModelChatFormat } from "../../tokenizer/model-format.ts";
import { HarmonyStream } from "../../tokenizer/harmony-parse.ts";
import {
  chatDeltaJson,
  chatMessageJson,
  parseAnswer,
  streamDeltas,
  ThinkState,
  toolSyntax,
  type TokenDelta,
  type ToolSyntax,
} from "../../tokenizer/output-parser.ts";
import { choicesOf, completionLogprobs, isObject, numberArray, type Json } from "../upstream/fields.ts";

export interface AnswerSettings {
  format: ModelChatFormat;
  /** Tools were given and tool_choice is not "none". */
  toolParsing: boolean;
  /** False when the harness sent include_reasoning: false. */
  includeReasoning: boolean;
  /** The vLLM version answered as: the name reasoning goes under (default `reasoning`, vLLM >= 0.17). */
  reasoningField?: ReasoningField;
  /** The request's tools: the XML tool parser converts parameter values by their schemas. */
  tools?: readonly unknown[] | null;
  /**
   * Ids the answer starts with that were sampled earlier and sent as prompt (a branch cut at a token position): the
   * harness gets them in front of the new ones, parsed as one answer; the capture records only the new ones.
   */
  prefix?: readonly number[] | null;
}

/** The tool-call syntax of the served model's family, for this request's tools. */
function syntaxOf(settings: AnswerSettings): ToolSyntax {
  return toolSyntax(settings.format.family.toolParser, settings.tools);
}

/** One choice's answer as the harness received it, with the ids it was sampled as. */
export interface AnsweredChoice {
  index: number;
  message: Json;
  tokenIds: number[];
}

function randomId(): string {
  return randomUUID().replaceAll("-", "");
}

const newCallId = (): string => `chatcmpl-tool-${randomId()}`;

function logprobEntries(
  format: ModelChatFormat,
  ids: readonly number[],
  logprobs: readonly number[] | null,
): Json | null {
  if (!logprobs) return null;
  return {
    content: ids.map((id, i) => ({
      token: format.tokenString(id),
      logprob: logprobs[i] ?? null,
      bytes: null,
      top_logprobs: [],
    })),
  };
}

/** The chat.completion for a whole /v1/completions response. */
export function chatFromCompletion(
  completion: Json,
  settings: AnswerSettings,
): { chat: Json; answers: AnsweredChoice[] } {
  const answers: AnsweredChoice[] = [];
  let promptIds: number[] | null = numberArray(completion["prompt_token_ids"]);
  const choices = choicesOf(completion).map((raw, position) => {
    const index = typeof raw["index"] === "number" ? raw["index"] : position;
    promptIds ??= numberArray(raw["prompt_token_ids"]);
    const ids = numberArray(raw["token_ids"]) ?? [];
    const prefix = settings.prefix ?? [];
    const text = settings.format.textPieces(prefix).join("") + (typeof raw["text"] === "string" ? raw["text"] : "");
    const sampled = prefix.length ? [...prefix, ...ids] : ids;
    const parsed = parseAnswer(settings.format, sampled, text, settings.toolParsing, syntaxOf(settings));
    const message: Json = chatMessageJson(parsed, newCallId, settings.includeReasoning, settings.reasoningField);
    answers.push({ index, message, tokenIds: prefix.length ? [...prefix, ...ids] : ids });
    const finish = raw["finish_reason"];
    return {
      index,
      message,
      logprobs: logprobEntries(settings.format, ids, completionLogprobs(raw)),
      finish_reason: parsed.toolCalls.length > 0 ? "tool_calls" : (finish ?? null),
      stop_reason: raw["stop_reason"] ?? null,
      token_ids: ids,
      ...routingFields(raw),
    };
  });
  const chat: Json = {
    id: `chatcmpl-${randomId()}`,
    object: "chat.completion",
    created: completion["created"] ?? Math.floor(Date.now() / 1000),
    model: completion["model"],
    choices,
    service_tier: null,
    system_fingerprint: null,
    usage: completion["usage"] ?? null,
    prompt_logprobs: null,
    prompt_token_ids: promptIds,
    kv_transfer_params: null,
    ...routingFields(completion),
  };
  return { chat, answers };
}

/** The routed-experts fields of a completion body, chunk or choice, carried into the chat answer for the capture. */
function routingFields(holder: Json): Json {
  const out: Json = {};
  for (const key of ["routed_experts", "sglext", "sgl_ext"]) if (holder[key] != null) out[key] = holder[key];
  return out;
}

interface PendingToken {
  id: number;
  /** Sent as prompt (a branch's kept prefix): part of the answer's text, not of what this call sampled. */
  context: boolean;
  piece: string;
  logprob: number | null;
  /** Usage of the completion chunk it came in (continuous usage stats). */
  usage: unknown;
}

interface ChoiceStream {
  index: number;
  ids: number[];
  pieces: string[];
  /** The answer's text so far. */
  text: string;
  tokens: PendingToken[];
  /** Tokens before this index are sent; from `held` on they wait for the end (a tool call began). */
  sent: number;
  held: number | null;
  think: ThinkState;
  /** gpt-oss: the harmony parser's state, which decides every token's delta (channels, not think markup). */
  harmony: HarmonyStream | null;
  callIds: string[];
  toolsStreamed: boolean;
  finishReason: string | null;
  stopReason: unknown;
  done: boolean;
  content: string;
  toolCalls: Array<{ name: string; arguments: string }>;
}

/** Turns a /v1/completions stream's chunks into the chat.completion.chunk stream of the same answer. */
export class ChatChunkStream {
  readonly #settings: AnswerSettings;
  readonly #syntax: ToolSyntax;
  readonly #base: Json;
  readonly #choices = new Map<number, ChoiceStream>();

  constructor(settings: AnswerSettings) {
    this.#settings = settings;
    this.#syntax = syntaxOf(settings);
    this.#base = {
      id: `chatcmpl-${randomId()}`,
      object: "chat.completion.chunk",
      created: Math.floor(Date.now() / 1000),
      model: null,
    };
  }

  /** The chat chunks one completion chunk releases. */
  push(chunk: Json): Json[] {
    if (this.#base["model"] === null && chunk["model"] !== undefined) this.#base["model"] = chunk["model"];
    if (typeof chunk["created"] === "number") this.#base["created"] = chunk["created"];
    const out: Json[] = [];
    const choices = chunk["choices"];
    if (Array.isArray(choices) && choices.length === 0 && chunk["usage"] != null) {
      out.push({ ...this.#base, choices: [], usage: chunk["usage"] });
      return out;
    }
    // SGLang's routed experts (a chunk without choices after the finish) pass on for the capture.
    if (Array.isArray(choices) && choices.length === 0 && (chunk["sglext"] != null || chunk["sgl_ext"] != null)) {
      out.push({ ...this.#base, choices: [], usage: null, ...routingFields(chunk) });
      return out;
    }
    choicesOf(chunk).forEach((raw, position) => {
      const index = typeof raw["index"] === "number" ? raw["index"] : position;
      let state = this.#choices.get(index);
      if (!state) {
        state = this.#open(index);
        const head: Json = {
          ...this.#base,
          choices: [{ index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }],
        };
        head["prompt_token_ids"] = numberArray(raw["prompt_token_ids"]) ?? numberArray(chunk["prompt_token_ids"]);
        out.push(head);
        const prefix = this.#settings.prefix ?? [];
        const prefixPieces = this.#settings.format.textPieces(prefix);
        prefix.forEach((id, k) =>
          this.#add(state!, { id, context: true, piece: prefixPieces[k]!, logprob: null, usage: null }, out),
        );
      }
      const ids = numberArray(raw["token_ids"]) ?? [];
      const text = typeof raw["text"] === "string" ? raw["text"] : "";
      const logprobs = completionLogprobs(raw);
      const pieces = this.#pieces(ids, text);
      ids.forEach((id, k) => {
        const usage = chunk["usage"] ?? null;
        this.#add(state, { id, context: false, piece: pieces[k]!, logprob: logprobs?.[k] ?? null, usage }, out);
      });
      if (typeof raw["finish_reason"] === "string") {
        state.finishReason = raw["finish_reason"];
        state.stopReason = raw["stop_reason"] ?? null;
        this.#finishChoice(state, out);
      }
    });
    return out;
  }

  /** Whether every choice finished. */
  get complete(): boolean {
    return this.#choices.size > 0 && [...this.#choices.values()].every((c) => c.done);
  }

  /** Each choice's answer as the harness received it (complete choices only). */
  answers(): AnsweredChoice[] {
    return [...this.#choices.values()]
      .filter((c) => c.done)
      .map((c) => ({
        index: c.index,
        message: {
          role: "assistant",
          content: c.content || null,
          tool_calls: c.toolCalls.map((call, i) => ({
            id: c.callIds[i],
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          })),
        },
        tokenIds: c.ids,
      }));
  }

  /** Takes the next token of a choice: the one before it is not the last, so it can go now (unless held). */
  #add(state: ChoiceStream, token: PendingToken, out: Json[]): void {
    this.#release(state, state.tokens.length, out);
    state.tokens.push(token);
    state.ids.push(token.id);
    state.pieces.push(token.piece);
    if (state.held === null && this.#settings.toolParsing && this.#syntax.opensCall(token.piece, state.text))
      state.held = state.tokens.length - 1;
    state.text += token.piece;
  }

  #open(index: number): ChoiceStream {
    const state: ChoiceStream = {
      index,
      ids: [],
      pieces: [],
      text: "",
      tokens: [],
      sent: 0,
      held: null,
      think: new ThinkState(this.#settings.format.think),
      harmony: this.#settings.format.family.toolParser === "openai" ? new HarmonyStream(this.#settings.format) : null,
      callIds: [],
      toolsStreamed: false,
      finishReason: null,
      stopReason: null,
      done: false,
      content: "",
      toolCalls: [],
    };
    this.#choices.set(index, state);
    return state;
  }

  /** The text each id of a chunk releases: the upstream's own text, split over the ids where it has several. */
  #pieces(ids: readonly number[], text: string): string[] {
    if (ids.length === 1) return [text];
    if (ids.length === 0) return [];
    const pieces = this.#settings.format.textPieces(ids);
    if (pieces.join("") === text) return pieces;
    return ids.map((_, k) => (k === ids.length - 1 ? text : ""));
  }

  /** Sends tokens [sent, upto) that are not held, deciding their deltas one by one. */
  #release(state: ChoiceStream, upto: number, out: Json[]): void {
    const limit = state.held === null ? upto : Math.min(upto, state.held);
    while (state.sent < limit) {
      const t = state.sent++;
      out.push(this.#tokenChunk(state, t, this.#plainDelta(state, t), false));
    }
  }

  /** A token before any tool call: reasoning or content by where the think block is (as streamDeltas decides it). */
  #plainDelta(state: ChoiceStream, t: number): TokenDelta | null {
    const token = state.tokens[t]!;
    if (state.harmony) return state.harmony.next(token.id, token.piece);
    const kind = state.think.next(token.id);
    if (kind === "markup" || !token.piece) return null;
    return kind === "reasoning" ? { reasoning_content: token.piece } : { content: token.piece };
  }

  #finishChoice(state: ChoiceStream, out: Json[]): void {
    if (state.held === null) {
      this.#release(state, state.tokens.length - 1, out);
      const t = state.tokens.length - 1;
      if (t >= state.sent) {
        state.sent = t + 1;
        out.push(this.#tokenChunk(state, t, this.#plainDelta(state, t), true));
      } else {
        out.push(this.#tokenChunk(state, -1, null, true));
      }
    } else {
      // The whole text is known: the deltas of the held tokens are those of the parser over the whole generation.
      const fullText = state.pieces.join("");
      const deltas = streamDeltas(
        { ids: state.ids, pieces: state.pieces, fullText, toolCalls: this.#syntax.spans(fullText) },
        true,
        this.#settings.format.think,
      );
      for (let t = state.sent; t < state.tokens.length; t++) {
        out.push(this.#tokenChunk(state, t, deltas[t] ?? null, t === state.tokens.length - 1));
      }
      if (state.tokens.length === state.sent) out.push(this.#tokenChunk(state, -1, null, true));
      state.sent = state.tokens.length;
    }
    state.done = true;
  }

  /** The chunk of token t (-1: a finish with no token of its own), as vLLM writes it. */
  #tokenChunk(state: ChoiceStream, t: number, delta: TokenDelta | null, last: boolean): Json {
    const token = t >= 0 ? state.tokens[t]! : null;
    let kept = delta;
    if (kept?.reasoning_content !== undefined && !this.#settings.includeReasoning) kept = null;
    if (kept?.toolCalls) state.toolsStreamed = true;
    if (kept) this.#accumulate(state, kept);
    const deltaBody = kept
      ? chatDeltaJson(kept, state.callIds, newCallId, this.#settings.reasoningField)
      : last && token?.id === this.#settings.format.turnEnd.id
        ? { content: "" }
        : {};
    const choice: Json = {
      index: state.index,
      delta: deltaBody,
      logprobs:
        token && token.logprob !== null && !token.context
          ? logprobEntries(this.#settings.format, [token.id], [token.logprob])
          : null,
      finish_reason: last ? (state.toolsStreamed ? "tool_calls" : state.finishReason) : null,
    };
    if (last) choice["stop_reason"] = state.stopReason;
    choice["token_ids"] = token && !token.context ? [token.id] : [];
    const chunk: Json = { ...this.#base, choices: [choice] };
    if (token?.usage != null) chunk["usage"] = token.usage;
    return chunk;
  }

  #accumulate(state: ChoiceStream, delta: TokenDelta): void {
    if (delta.content !== undefined) state.content += delta.content;
    for (const call of delta.toolCalls ?? []) {
      const entry = (state.toolCalls[call.index] ??= { name: "", arguments: "" });
      if (call.name !== undefined) entry.name = call.name;
      if (call.arguments !== undefined) entry.arguments += call.arguments;
    }
  }
}

/** Whether a parsed body is a /v1/completions answer (not an error object). */
export function isCompletion(body: Json): boolean {
  return Array.isArray(body["choices"]) && !isObject(body["error"]);
}
