// Token-id rules for "near the root" and "system prompt". Reconstruction never decodes text: a chat format is the
// few special ids that delimit turns.
import type { ModelChatFormat } from "../tokenizer/model-format.ts";
import { turnIdsOf, turnMarksOf, type TurnIds } from "../tokenizer/turn-marks.ts";
import type { TokenIds } from "./types.ts";

export interface ChatFormat {
  /** Opens the model's turn, the generation prompt's (`<|im_start|>`, `<|start_header_id|>`, `<｜Assistant｜>`). */
  turnStart: number;
  /** Closes a sampled turn (`<|im_end|>`, DeepSeek's `<｜end▁of▁sentence｜>`). */
  turnEnd: number;
  /** Ids a system turn starts with (`<|im_start|>system`). */
  systemHeader: readonly number[];
  /** Closes the reasoning of a completion (`</think>`): what follows is the answer's content. */
  thinkEnd: number;
  /** Opens a tool call in a completion (`<tool_call>`): the content ends before it. */
  toolCallStart: number;
  /** What a generation prompt ends with when thinking is off (`<think>\n\n</think>\n\n`). */
  emptyThink: readonly number[];
  /** Every turn's opener and closer (turnStart and turnEnd are the model's own), as the family delimits turns. */
  turns: TurnIds;
  /** Ids of a turn after the system turn that is part of the system prompt (harmony's `<|start|>developer`). */
  instructionsHeader?: readonly number[];
}

/**
 * Qwen3 (and Qwen2.5): `<|im_start|>` 151644, `<|im_end|>` 151645, "system" 8948, `</think>` 151668,
 * `<tool_call>` 151657; `<think>` 151667 and "\n\n" 271 in the empty think block — what `chatFormatOf` derives from
 * the built-in Qwen3 tokenizer (a test holds them equal), written out so reconstruction needs no tokenizer loaded.
 */
export const QWEN3_CHAT_FORMAT: ChatFormat = {
  turnStart: 151644,
  turnEnd: 151645,
  systemHeader: [151644, 8948],
  thinkEnd: 151668,
  toolCallStart: 151657,
  emptyThink: [151667, 271, 151668, 271],
  turns: { starts: [151644], ends: [151645], roleIds: 1, modelTurnAfter: [] },
};

/** The token-level rules of a served model's chat format, as its family names them (-1: it has no such token). */
export function chatFormatOf(model: ModelChatFormat): ChatFormat {
  const instructions = model.family.markup.instructionsStart;
  return {
    turnStart: model.turnStart.id,
    turnEnd: model.turnEnd.id,
    systemHeader: [...model.systemHeader],
    thinkEnd: model.think?.thinkClose ?? -1,
    toolCallStart: model.toolCallStart,
    emptyThink: [...model.emptyThink],
    turns: turnIdsOf(turnMarksOf(model.family.markup), model.tokenId),
    ...(instructions ? { instructionsHeader: model.encode(instructions) } : {}),
  };
}

function startsWith(ids: TokenIds, prefix: readonly number[], at = 0): boolean {
  if (ids.length < at + prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (ids[at + i] !== prefix[i]) return false;
  return true;
}

/** Where the turn whose header ends before `from` closes (its closer's index), or the prompt's length. */
function turnClose(prompt: TokenIds, from: number, format: ChatFormat): number {
  const { starts, ends } = format.turns;
  for (let i = from; i < prompt.length; i++) if (ends.includes(prompt[i]!) || starts.includes(prompt[i]!)) return i;
  return prompt.length;
}

/**
 * Whether two prompts that agree on their first `divergence` tokens have different system prompts.
 * They do when they part inside the header of the first turn (different roles: one has a system turn, the other
 * does not, or not a chat at all), or inside the system turn up to and including its `<|im_end|>` (or, where the
 * system prompt has no closer, up to the first turn's opener: DeepSeek's `<｜User｜>`), or inside a turn that follows it
 * and belongs to the system prompt (harmony's developer message, which holds the harness's system prompt and tools).
 */
export function divergesInSystemPrompt(prompt: TokenIds, divergence: number, format: ChatFormat): boolean {
  const header = format.systemHeader;
  if (divergence < header.length) return true;
  if (!startsWith(prompt, header)) return false;
  let close = turnClose(prompt, header.length, format);
  const instructions = format.instructionsHeader ?? [];
  if (instructions.length > 0 && startsWith(prompt, instructions, close + 1))
    close = turnClose(prompt, close + 1 + instructions.length, format);
  return close === prompt.length || divergence <= close;
}

/** Turns in a prompt: the number of turn openers (the generation prompt counts as one). */
export function countTurns(prompt: TokenIds, format: ChatFormat): number {
  const starts = format.turns.starts;
  let n = 0;
  for (let i = 0; i < prompt.length; i++) if (starts.includes(prompt[i]!)) n++;
  return n;
}
