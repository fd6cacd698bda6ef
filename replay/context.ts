// A token shown where it stands: the decoded text just before it, the token itself and the text just after, so a
// reader sees which word drifted or where two prompts part.

export type Decode = (ids: readonly number[]) => string;

export interface TokenInContext {
  /** Position in the sequence. */
  position: number;
  tokenId: number;
  token: string;
  before: string;
  after: string;
}

export const CONTEXT_TOKENS = 12;

export function tokenInContext(
  ids: readonly number[],
  position: number,
  decode: Decode,
  span = CONTEXT_TOKENS,
): TokenInContext {
  return {
    position,
    tokenId: ids[position]!,
    token: decode([ids[position]!]),
    before: decode(ids.slice(Math.max(0, position - span), position)),
    after: decode(ids.slice(position + 1, position + 1 + span)),
  };
}

/** One line: `…before⟦token⟧after…`, newlines shown as ⏎. */
export function contextLine(t: Pick<TokenInContext, "before" | "token" | "after">): string {
  const flat = (s: string) => s.replaceAll("\n", "⏎");
  return `…${flat(t.before)}⟦${flat(t.token)}⟧${flat(t.after)}…`;
}
