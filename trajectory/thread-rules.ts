// Token-id rules about agent threads that both engines (prefix tree, naive reference) apply the same way:
// whether a divergence falls in the markup of a turn whose completion was sampled (a re-serialization, not a branch),
// and whether a new thread's prompt starts from a summary an earlier call produced (a compaction).
import type { ChatFormat } from "./chat-format.ts";
import type { BreakCause, TokenIds } from "./types.ts";

/** The old branch's token at a depth, and the sequence that sampled it (null: context). */
export interface BranchToken {
  token: number;
  sampledBy: number | null;
}

/** Generation prompts are short: `<|im_start|>assistant\n` plus at most an empty think block or a prefill. */
const MAX_MARKUP = 16;

/** The sequence that sampled the completion a markup divergence falls before, and that completion's first token. */
export interface MarkupBreak {
  owner: number;
  firstSampled: number;
}

/**
 * The sequence whose sampled completion follows the divergence inside the same turn, when the prompt and the old
 * branch part in that turn's markup (after its role, before its first sampled token): e.g. an empty think block that
 * the history no longer renders, or the generation prompt's last newline re-merged by BPE with the content that
 * follows it (a turn written back without its `<think>` block). Null when the divergence is anywhere else. `oldAt(i)`
 * reads the old branch (null past its end).
 */
export function markupBreakOwner(
  prompt: TokenIds,
  matched: number,
  format: ChatFormat,
  oldAt: (i: number) => BranchToken | null,
): MarkupBreak | null {
  const { starts, ends, roleIds } = format.turns;
  let turn = -1;
  for (let i = matched - 1; i >= 0; i--) {
    if (starts.includes(prompt[i]!)) {
      turn = i;
      break;
    }
  }
  // The turn's start and its role must be shared: parting on the role is a different turn, not its markup.
  if (turn < 0 || matched < turn + 1 + roleIds) return null;
  for (let k = 0; k < MAX_MARKUP; k++) {
    const old = oldAt(matched + k);
    if (old === null) return null;
    if (old.sampledBy !== null) return { owner: old.sampledBy, firstSampled: old.token };
    if (starts.includes(old.token) || ends.includes(old.token)) return null;
  }
  return null;
}

/**
 * Whether the prompt left the old branch where a harness dropped context it had put last (OpenClaw ends every request
 * with an internal-context user message and leaves it out of the next one, which appends the answer, the tool result
 * and the context again): the old prompt ends with one or more turns of other roles than the model's, then the
 * generation prompt, and the prompt holds the model's turn where the first of them started. The divergence must fall
 * in that turn's header (its role, or its opener where the opener is the role): a message of the same role there is
 * the harness rewriting it (`context_changed`). `oldAt(i)` reads the old branch, whose prompt is `oldPromptLength` long.
 */
export function movedContext(
  prompt: TokenIds,
  matched: number,
  format: ChatFormat,
  oldAt: (i: number) => number | null,
  oldPromptLength: number,
): boolean {
  const { starts, roleIds, modelTurnAfter } = format.turns;
  if (matched >= oldPromptLength || matched >= prompt.length) return false;
  const opener = (id: number | null) => id !== null && starts.includes(id);
  let first = -1;
  if (opener(oldAt(matched))) first = matched;
  else {
    for (let i = matched - 1; i >= 0 && first < 0; i--) if (opener(prompt[i]!)) first = i;
    if (first < 0 || matched >= first + 1 + roleIds) return false;
  }
  const turns: number[] = [];
  for (let i = first; i < oldPromptLength; i++) if (opener(oldAt(i))) turns.push(i);
  if (turns.length < 2) return false;
  const role = (at: number) => oldAt(at + roleIds);
  const generation = turns[turns.length - 1]!;
  const model = role(generation);
  if (model === null || turns.slice(0, -1).some((at) => role(at) === model)) return false;
  if (roleIds === 1) return first < matched && prompt[first + 1] === model;
  // The opener is the role: the model's opener, or its turn starting with none after a tool output (DeepSeek).
  if (first > 0 && modelTurnAfter.includes(prompt[first - 1]!) && !opener(prompt[first]!)) return true;
  // DeepSeek V3.1's template ends the last user turn with spaces before the model's opener: a few ids of the turn
  // before may come first.
  for (let i = first; i < Math.min(prompt.length, first + MAX_TURN_TAIL); i++) {
    if (prompt[i] === model) return true;
    if (opener(prompt[i]!) || format.turns.ends.includes(prompt[i]!)) return false;
  }
  return false;
}

/** Ids a template may write at the end of a turn before the model's opener (DeepSeek V3.1's spaces). */
const MAX_TURN_TAIL = 4;

/**
 * Why a prompt left the old branch, where the ids tell. The old branch's token at the divergence is `<think>` (the
 * first id of the format's empty think block): the new prompt renders that turn without its reasoning. Otherwise a
 * divergence in context (no sampled or markup owner) that the classifier found no other kind for is context the
 * harness changed (`contextual`: the caller's verdict on that).
 */
export function breakCause(oldToken: number | null, format: ChatFormat, contextual: boolean): BreakCause | null {
  const thinkStart = format.emptyThink.length > 0 ? format.emptyThink[0]! : -1;
  if (oldToken !== null && oldToken === thinkStart) return "reasoning_dropped";
  return contextual ? "context_changed" : null;
}

/**
 * [start, end) of a completion's content: after its reasoning (`</think>`), before its first tool call or its final
 * turn end. Reasoning and tool-call arguments are not a summary (a sub-agent's task is written in tool arguments).
 */
export function contentRange(sampled: TokenIds, format: ChatFormat): [number, number] {
  let start = 0;
  let end = sampled.length;
  for (let i = 0; i < sampled.length; i++) {
    if (sampled[i] === format.thinkEnd) start = i + 1;
    else if (sampled[i] === format.toolCallStart) {
      end = i;
      break;
    }
  }
  if (end > start && sampled[end - 1] === format.turnEnd) end--;
  return [start, Math.max(start, end)];
}

/** Content shorter than this is not taken for a summary (a few words reappear by chance). */
export const MIN_SUMMARY_TOKENS = 8;
/** A summary is found when this many of its tokens (or half of it, if shorter) appear in a row in the prompt. */
const SUMMARY_RUN = 64;
const GRAM = 8;

/**
 * [start, end) of the assistant turns of a prompt, its generation prompt left out: the turns whose role ids are those
 * of the turn the prompt ends with (`<|im_start|>assistant`); where the opener is the role (DeepSeek), the turns the
 * model's opener starts and those that start with no opener after a tool output.
 */
function assistantTurns(ids: TokenIds, format: ChatFormat): Array<[number, number]> {
  const { starts: openers, roleIds, modelTurnAfter } = format.turns;
  const MODEL = -2;
  const starts: number[] = [];
  const roles: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    if (openers.includes(ids[i]!)) {
      starts.push(i);
      roles.push(roleIds === 0 ? ids[i]! : (ids[i + 1] ?? -1));
    } else if (modelTurnAfter.includes(ids[i]!) && i + 1 < ids.length && !openers.includes(ids[i + 1]!)) {
      starts.push(i + 1);
      roles.push(MODEL);
    }
  }
  const last = starts.length - 1;
  if (last < 0 || (roleIds === 1 && starts[last]! + 1 >= ids.length)) return [];
  const role = roleIds === 0 ? format.turnStart : roles[last]!;
  const turns: Array<[number, number]> = [];
  for (let k = 0; k < last; k++) {
    if (roles[k] === role || roles[k] === MODEL) turns.push([starts[k]!, starts[k + 1]!]);
  }
  return turns;
}

/**
 * 8-gram index of a prompt, built once per call and probed with every earlier completion. Runs inside the prompt's
 * own assistant turns do not count: a prompt that holds a history (a summarizer's request) holds its answers there,
 * while a thread that starts from a summary holds it in a user or system turn.
 */
export class GramIndex {
  readonly #ids: TokenIds;
  readonly #grams = new Map<number, number[]>();
  readonly #assistant: Array<[number, number]>;

  constructor(ids: TokenIds, format: ChatFormat) {
    this.#ids = ids;
    this.#assistant = assistantTurns(ids, format);
    for (let i = 0; i + GRAM <= ids.length; i++) {
      const h = gramHash(ids, i);
      const list = this.#grams.get(h);
      if (list === undefined) this.#grams.set(h, [i]);
      else list.push(i);
    }
  }

  /**
   * Whether `content[start, end)` reads as a summary taken into this prompt: at least min(64, half of it) of its
   * tokens appear in a row (ids at the content's edges may re-merge with the text around them, so a run is enough).
   */
  holdsSummary(content: TokenIds, start: number, end: number): boolean {
    const length = end - start;
    if (length < MIN_SUMMARY_TOKENS) return false;
    const need = Math.max(GRAM, Math.min(SUMMARY_RUN, Math.floor(length / 2)));
    const ids = this.#ids;
    for (let j = start; j + GRAM <= end; j++) {
      const hits = this.#grams.get(gramHash(content, j));
      if (hits === undefined) continue;
      for (const at of hits) {
        let n = 0;
        while (j + n < end && at + n < ids.length && content[j + n] === ids[at + n]) n++;
        if (n >= need && !this.#inAssistantTurn(at)) return true;
      }
    }
    return false;
  }

  #inAssistantTurn(at: number): boolean {
    return this.#assistant.some(([start, end]) => start <= at && at < end);
  }
}

function gramHash(ids: TokenIds, at: number): number {
  let h = 0x811c9dc5;
  for (let k = 0; k < GRAM; k++) h = Math.imul(h ^ ids[at + k]!, 0x01000193);
  return h >>> 0;
}
