// How a chat template delimits turns, beyond one opener and one closer: ChatML writes `<|im_start|>ROLE` … `<|im_end|>`
// for every turn, but DeepSeek V3.1's template opens each role with its own token (`<｜User｜>`, `<｜Assistant｜>`,
// `<｜tool▁output▁begin｜>`), closes a user turn with nothing (the next opener ends it), and writes no generation
// prompt after a tool output (the model's turn starts right after `<｜tool▁output▁end｜>`); harmony closes an
// assistant turn with `<|end|>`, `<|call|>` or `<|return|>`. Whatever reads turns by id (the trajectory's rules, the
// block encoder) reads them from here.
import type { FamilyMarkup } from "./families.ts";

export interface TurnMarks {
  /** Every token that opens a turn. */
  readonly starts: readonly string[];
  /** Every token that closes one; a turn with no closer ends where the next starts. */
  readonly ends: readonly string[];
  /** Whether a role name follows an opener (`<|im_start|>assistant`), or the opener is the role (`<｜User｜>`). */
  readonly roleAfterStart: boolean;
  /** Closers after which the model's turn starts with no opener of its own. */
  readonly modelTurnAfter: readonly string[];
}

/** The turn marks ids: what the trajectory's rules read. */
export interface TurnIds {
  readonly starts: readonly number[];
  readonly ends: readonly number[];
  /** Ids naming the role after an opener: 1, or 0 where the opener is the role. */
  readonly roleIds: 0 | 1;
  readonly modelTurnAfter: readonly number[];
}

/** A family's turn marks: its own, or one opener and one closer (`turnStart`, `turnEnd`, with `alsoEnds`). */
export function turnMarksOf(markup: FamilyMarkup): TurnMarks {
  return (
    markup.turns ?? {
      starts: [markup.turnStart],
      ends: [markup.turnEnd, ...(markup.alsoEnds ?? [])],
      roleAfterStart: true,
      modelTurnAfter: [],
    }
  );
}

/** The marks as ids (a mark the tokenizer has no single id for is left out). */
export function turnIdsOf(marks: TurnMarks, tokenId: (text: string) => number | undefined): TurnIds {
  const ids = (texts: readonly string[]) =>
    texts.map((text) => tokenId(text)).filter((id): id is number => id !== undefined);
  return {
    starts: ids(marks.starts),
    ends: ids(marks.ends),
    roleIds: marks.roleAfterStart ? 1 : 0,
    modelTurnAfter: ids(marks.modelTurnAfter),
  };
}
