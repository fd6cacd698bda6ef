// What the upstream returned for each sampled assistant turn of a rollout, read from its call records, and how an
// assistant message of a later request is matched to one: by tool-call ids first, then by content and tool calls
// equal up to the changes harnesses make (surrounding whitespace, the spelling of tool-call arguments).
import type { SeenCalls } from "../../store/call-tokens.ts";
import { RawJson, SplicedJson, type CallRecord } from "../../store/records.ts";
import type { ChatFormat } from "../../trajectory/chat-format.ts";
import { choicesOf, isObject, type Json } from "../upstream/fields.ts";
import type { SampledTurn } from "./qwen3-turn.ts";

export interface RecordedToolCall {
  id: string | null;
  name: string;
  arguments: string;
}

export interface RecordedTurn extends SampledTurn {
  callSeq: number;
  calls: RecordedToolCall[];
  /** What repair compares with, worked out once per turn (requests re-send every turn of the history). */
  memo?: { target: string; faithful: { reasoning: string | null; content: string } | null; argumentKeys: string[] };
}

function endsWith(ids: readonly number[] | null, tail: readonly number[]): boolean {
  if (ids === null || tail.length === 0 || ids.length < tail.length) return false;
  for (let i = 0; i < tail.length; i++) if (ids[ids.length - tail.length + i] !== tail[i]) return false;
  return true;
}

function plain(body: unknown): unknown {
  return body instanceof RawJson || body instanceof SplicedJson ? body.value() : body;
}

function text(value: unknown): string | null {
  return typeof value === "string" ? value : null;
}

/** The sampled turns of one call (one per choice): from the chat response the upstream gave. */
export function recordedTurns(record: CallRecord, format: ChatFormat): RecordedTurn[] {
  if (record.status !== "ok") return [];
  const chat = record.api === "chat.completions" ? record.response : record.upstreamResponse;
  if (chat === undefined || record.api === "completions") return [];
  const body = plain(chat);
  if (!isObject(body)) return [];
  const thinkingOff = endsWith(record.promptTokenIds, format.emptyThink);
  const out: RecordedTurn[] = [];
  for (const choice of choicesOf(body)) {
    const message = choice["message"];
    if (!isObject(message)) continue;
    const calls = toolCallsOf(message);
    out.push({
      callSeq: record.seq,
      reasoning: text(message["reasoning_content"]) ?? text(message["reasoning"]),
      content: text(message["content"]),
      toolCalls: calls.length,
      calls,
      thinkingOff,
    });
  }
  return out;
}

export function toolCallsOf(message: Json): RecordedToolCall[] {
  const calls = message["tool_calls"];
  if (!Array.isArray(calls)) return [];
  return calls.filter(isObject).map((call) => {
    const fn = isObject(call["function"]) ? call["function"] : {};
    const args = fn["arguments"];
    return {
      id: text(call["id"]),
      name: String(fn["name"] ?? ""),
      arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}),
    };
  });
}

/** Text of a chat content value (a string, or parts whose text vLLM joins with newlines). */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part): part is Json => isObject(part) && (part["type"] === "text" || part["type"] === "input_text"))
    .map((part) => String(part["text"] ?? ""))
    .join("\n");
}

/** Arguments as compared: parsed and written with sorted keys, so a re-spelled object still matches. */
export function argumentsKey(args: string): string {
  try {
    return JSON.stringify(sortKeys(JSON.parse(args)));
  } catch {
    return args;
  }
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (!isObject(value)) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, sortKeys(value[k])]),
  );
}

/** The key a turn is found by when no tool-call id matches: content without surrounding whitespace, tool calls. */
export function matchKey(content: string, calls: readonly RecordedToolCall[]): string {
  const visible = content.includes("</think>") ? content.slice(content.lastIndexOf("</think>") + 8) : content;
  return [visible.trim(), ...calls.map((c) => `${c.name}\u0001${argumentsKey(c.arguments)}`)].join("\u0000");
}

/**
 * Where a turn of call `seq` goes in `list` (ordered by call): after every turn of a call up to it. Turns mostly
 * arrive in call order, so this is the end; sorting the list on each add cost O(n log n) per call in a rollout whose
 * model keeps answering the same (thousands of identical turns: ~0.3 ms a call).
 */
function insertionIndex(list: readonly RecordedTurn[], seq: number): number {
  let low = 0;
  let high = list.length;
  if (high > 0 && list[high - 1]!.callSeq <= seq) return high;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (list[mid]!.callSeq <= seq) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** One rollout's sampled turns, found by tool-call id or by content. */
export class RolloutTurns {
  readonly #byId = new Map<string, RecordedTurn>();
  readonly #byKey = new Map<string, RecordedTurn[]>();
  #chars = 0;
  /** Every call whose turns were added (none, for most failed calls), and how far the commit log was read. */
  readonly seen: SeenCalls = { seqs: new Set(), mark: 0 };

  /** Rough memory held (characters of content, reasoning and arguments). */
  get size(): number {
    return Math.max(1, this.#chars);
  }

  add(turn: RecordedTurn): void {
    for (const call of turn.calls) if (call.id) this.#byId.set(call.id, turn);
    const key = matchKey(turn.content ?? "", turn.calls);
    const list = this.#byKey.get(key);
    if (list === undefined) this.#byKey.set(key, [turn]);
    else list.splice(insertionIndex(list, turn.callSeq), 0, turn);
    this.#chars += key.length + (turn.reasoning?.length ?? 0) + (turn.content?.length ?? 0);
  }

  /**
   * The turn an assistant message of a request came from. By content, the first one sampled after `afterSeq` (the
   * turn matched before it in the same request): a history lists its turns in the order they were sampled.
   */
  find(message: Json, afterSeq: number): RecordedTurn | null {
    const calls = toolCallsOf(message);
    for (const call of calls) {
      const turn = call.id ? this.#byId.get(call.id) : undefined;
      if (turn !== undefined) return turn;
    }
    const list = this.#byKey.get(matchKey(contentText(message["content"]), calls));
    return list?.find((turn) => turn.callSeq > afterSeq) ?? null;
  }
}
