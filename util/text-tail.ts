// The end of a long text (a log) for a one-line error: at most `max` characters (or the last word, when that alone is
// longer), starting at a line or a word, never inside one ("…onnection refused" reads as another word), marked with
// "…" when something was left out.
export function textTail(text: string, max: number): string {
  const trimmed = text.trim();
  if (trimmed.length <= max) return trimmed;
  const cut = trimmed.slice(-max);
  const line = cut.indexOf("\n");
  if (line >= 0 && line < cut.length - 1) return `…${cut.slice(line + 1).trimStart()}`;
  const space = cut.search(/\s/);
  if (space >= 0) return `…${cut.slice(space).trimStart()}`;
  // The last word alone is longer than `max`: it whole, rather than a piece that reads as another word.
  const word = /\S+$/.exec(trimmed)![0];
  return word.length === trimmed.length ? word : `…${word}`;
}
