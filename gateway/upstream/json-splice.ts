// Edits a JSON text in place of a parse and a re-serialization: the values of given keys become `null`. A streamed
// call's chunks are parsed once for capture anyway; giving the harness its chunk by serializing the parsed object again
// cost ~35% of a streamed call's relay work, nearly as much as the parse, and rewrote what the upstream wrote (number
// formats, escapes). Splicing the text keeps every byte the upstream sent but the values the harness did not ask for.
//
// The caller says how many keys of each name the edit must meet (counted on the parsed object). The keys are found by
// one regular-expression scan, at any depth; when the text holds a different number of keys of a name (a duplicate
// key, the same name elsewhere in the object) or is not well formed, the answer is null and the caller serializes as
// before: the fast path never guesses.

/** The keys whose values become null, each with how many times it must occur in the text. */
export type NullEdits = ReadonlyArray<{ key: string; count: number }>;

const BACKSLASH = 0x5c;
const QUOTE = 0x22;
const LF = 0x0a;

/** Where a run of JSON whitespace starting at `i` ends. */
function skipSpace(text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== LF && c !== 0x0d) return i;
    i++;
  }
}

/** Index just past the string token whose opening quote is at `i`; -1 when it does not end. */
function skipString(text: string, i: number): number {
  let at = i + 1;
  for (;;) {
    const quote = text.indexOf('"', at);
    if (quote < 0) return -1;
    let slashes = 0;
    for (let k = quote - 1; text.charCodeAt(k) === BACKSLASH; k--) slashes++;
    if (slashes % 2 === 0) return quote + 1;
    at = quote + 1;
  }
}

/** Index just past the JSON value starting at `i` (no leading whitespace); -1 when the text ends first. */
function skipValue(text: string, i: number): number {
  if (i >= text.length) return -1;
  const first = text.charCodeAt(i);
  if (first === QUOTE) return skipString(text, i);
  let depth = 0;
  for (let k = i; k < text.length; k++) {
    const c = text.charCodeAt(k);
    if (c === QUOTE) {
      const end = skipString(text, k);
      if (end < 0) return -1;
      k = end - 1;
    } else if (c === 0x5b || c === 0x7b) depth++;
    else if (c === 0x5d || c === 0x7d) {
      // A closing bracket at depth 0 ends the object or array holding a scalar value.
      if (depth === 0) return k;
      if (--depth === 0) return k + 1;
    } else if (depth === 0 && (c === 0x2c || c === 0x20 || c === LF || c === 0x09 || c === 0x0d)) return k;
  }
  // A value the text ends in: never the case inside an object, which ends with its brace.
  return -1;
}

/** One pattern per set of key names: a key token (`"name"`, then `:`), found by one native scan of the text. */
const KEY_PATTERNS = new Map<string, RegExp>();

function keyPattern(edits: NullEdits): RegExp {
  const names = edits.map((edit) => edit.key);
  const id = names.join("\0");
  let pattern = KEY_PATTERNS.get(id);
  if (!pattern) {
    const alternatives = names.map((name) => name.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&")).join("|");
    pattern = new RegExp(`"(${alternatives})"[ \\t\\r\\n]*:`, "g");
    KEY_PATTERNS.set(id, pattern);
  }
  return pattern;
}

/**
 * `text` with the value of every listed key replaced by `null`; null when the text does not hold exactly `count` keys
 * of each name, or cannot be read that way (then nothing is guessed: the caller serializes the parsed object).
 * The text must be one line (an SSE `data:` payload of several lines is refused).
 */
export function nullValues(text: string, edits: NullEdits): string | null {
  if (edits.length === 0) return text;
  if (text.indexOf("\n") >= 0) return null;
  const found = new Array<number>(edits.length).fill(0);
  const pattern = keyPattern(edits);
  let out = "";
  let copied = 0;
  pattern.lastIndex = 0;
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    // Inside a JSON string every quote is escaped, so `"name"` followed by `:` is a key token, unless its opening quote
    // is itself escaped: the end of a longer key (`"a\"name":`), refused.
    if (text.charCodeAt(match.index - 1) === BACKSLASH) return null;
    const edit = edits.findIndex((e) => e.key === match[1]);
    if (++found[edit]! > edits[edit]!.count) return null;
    const start = skipSpace(text, pattern.lastIndex);
    const end = skipValue(text, start);
    if (end < 0) return null;
    out += text.slice(copied, start) + "null";
    copied = end;
    pattern.lastIndex = end;
  }
  for (let k = 0; k < edits.length; k++) if (found[k] !== edits[k]!.count) return null;
  return copied === 0 ? text : out + text.slice(copied);
}
