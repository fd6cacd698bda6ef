// Builds captured calls the way a harness talking to vLLM serving Qwen3 produces them: prompts rendered with the real
// chat template and tokenizer, completions written in Qwen3's output format (`<think>\n…\n</think>\n\n`, content,
// `<tool_call>` blocks with Python-style JSON) and tokenized, ended by <|im_end|>, with deterministic logprobs.
import { renderChatIds, type ChatMessage } from "../../tokenizer/chat-template.ts";
import { qwen3Tokenizer } from "../../tokenizer/qwen3.ts";
import type { CallStatus, TokenSource } from "../../store/records.ts";
import type { CallTokens } from "../types.ts";

export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
  /** The argument text exactly as the model wrote it; default: Python-style JSON, which the template reproduces. */
  raw?: string;
}

export interface Turn {
  reasoning: string | null;
  content: string;
  toolCalls?: ToolCall[];
}

/** JSON as Python's json.dumps writes it (", " and ": "), which is what the template's `tojson` renders. */
export function pyJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pyJson).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}: ${pyJson(v)}`)
      .join(", ")}}`;
  }
  return JSON.stringify(value);
}

export function completionText(turn: Turn): string {
  let text = turn.reasoning === null ? "" : `<think>\n${turn.reasoning}\n</think>\n\n`;
  text += turn.content;
  (turn.toolCalls ?? []).forEach((call, i) => {
    if (i > 0 || turn.content) text += "\n";
    text += `<tool_call>\n{"name": "${call.name}", "arguments": ${call.raw ?? pyJson(call.arguments)}}\n</tool_call>`;
  });
  return text;
}

/** Sampled ids: the completion's tokens, then <|im_end|> (vLLM reports the EOS it sampled). */
export function completionIds(turn: Turn, options: { stopped?: boolean } = {}): number[] {
  const tok = qwen3Tokenizer();
  const ids = tok.encode(completionText(turn));
  return options.stopped === false ? ids : [...ids, tok.imEndId];
}

/** The assistant message a harness puts back in its history, from vLLM's parsed response. */
export function assistantMessage(turn: Turn, options: { keepReasoning?: boolean } = {}): ChatMessage {
  const message: ChatMessage = { role: "assistant", content: turn.content };
  if ((options.keepReasoning ?? true) && turn.reasoning !== null) message.reasoning_content = turn.reasoning;
  if (turn.toolCalls?.length) {
    message.tool_calls = turn.toolCalls.map((call, i) => ({
      id: `call_${i}`,
      type: "function",
      function: { name: call.name, arguments: call.raw ?? JSON.stringify(call.arguments) },
    }));
  }
  return message;
}

/**
 * The assistant message a harness builds from vLLM's parsed fields passed back verbatim: reasoning_content is the text
 * between `<think>` and `</think>` (newlines included), content is everything after `</think>` up to the first
 * `<tool_call>` (so "\n\n" for a turn that only calls tools).
 */
export function verbatimAssistantMessage(turn: Turn): ChatMessage {
  const message = assistantMessage(turn);
  if (turn.reasoning !== null) message.reasoning_content = `\n${turn.reasoning}\n`;
  const afterThink = turn.reasoning === null ? "" : "\n\n";
  const beforeTools = turn.toolCalls?.length && turn.content ? "\n" : "";
  message.content = afterThink + turn.content + beforeTools || null;
  return message;
}

export function toolMessage(content: string, id = "call_0"): ChatMessage {
  return { role: "tool", content, tool_call_id: id };
}

export function tool(name: string, properties: Record<string, string>): unknown {
  return {
    type: "function",
    function: {
      name,
      description: `The ${name} tool.`,
      parameters: {
        type: "object",
        properties: Object.fromEntries(Object.entries(properties).map(([k, type]) => [k, { type }])),
        required: Object.keys(properties),
      },
    },
  };
}

/** Deterministic, distinct logprobs for call `seq`, choice `choice`. */
export function fakeLogprobs(seq: number, choice: number, n: number): number[] {
  return Array.from({ length: n }, (_, k) => -(((seq * 131 + choice * 17 + k * 7) % 997) + 1) / 100);
}

export interface RecordedCall {
  callSeq: number;
  prompt: number[];
  completions: number[][];
  logprobs: number[][];
}

export interface ChatCallOptions {
  /** Tools offered; the call record says how many (unset: the record does not say, as records before it). */
  tools?: unknown[];
  /** Qwen3's enable_thinking: false renders the empty think block at the end of the prompt. */
  enableThinking?: boolean;
  status?: CallStatus;
  tokenSource?: TokenSource;
  tokenIssue?: string;
  /** Per choice: false when the completion was cut by max_tokens (no <|im_end|>). */
  stopped?: boolean[];
}

/** The calls of one rollout, numbered from 1 in the order they are made. */
export class CallLog {
  readonly calls: CallTokens[] = [];

  chat(messages: readonly ChatMessage[], turns: readonly Turn[], options: ChatCallOptions = {}): RecordedCall {
    const callSeq = this.calls.length + 1;
    const prompt = renderChatIds(messages, { tools: options.tools ?? null, enableThinking: options.enableThinking });
    const completions = turns.map((turn, i) => completionIds(turn, { stopped: options.stopped?.[i] ?? true }));
    const logprobs = completions.map((ids, i) => fakeLogprobs(callSeq, i, ids.length));
    const tokenSource = options.tokenSource ?? "upstream";
    const status = options.status ?? "ok";
    const failed = status !== "ok";
    const missing = tokenSource === "missing";
    this.calls.push({
      callSeq,
      promptIds: missing ? null : prompt,
      choices: completions.map((ids, index) => ({
        index,
        tokenIds: missing || failed ? null : ids,
        logprobs: missing || failed ? null : logprobs[index]!,
        finishReason: failed ? null : "stop",
      })),
      tokenSource,
      tokenIssue: options.tokenIssue ?? null,
      status,
      startedAt: 1_700_000_000_000 + callSeq,
      tools: options.tools === undefined ? null : options.tools.length,
    });
    return { callSeq, prompt, completions, logprobs };
  }
}

/** Mask with 1 over the given [start, end) ranges. */
export function maskOf(length: number, ranges: ReadonlyArray<readonly [number, number]>): number[] {
  const mask = new Array<number>(length).fill(0);
  for (const [start, end] of ranges) for (let i = start; i < end; i++) mask[i] = 1;
  return mask;
}

export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
