// Bounded nesting for JSON. V8 parses any depth (its JSON parser is iterative), but JSON.stringify, msgpack, zod and
// every translation walk recurse: a 40 KB body nested 20,000 deep overflows their stack. Bodies are refused at the
// door above MAX_JSON_DEPTH; what is already stored is serialized for reading with the too-deep parts replaced, so no
// stored value can make a read fail.

/** Deepest nesting accepted in any parsed input (real requests, tool schemas and arguments stay far below). */
export const MAX_JSON_DEPTH = 256;

/** True when `value` nests objects/arrays more than `limit` levels deep. Iterative: any depth is safe to check. */
export function exceedsDepth(value: unknown, limit = MAX_JSON_DEPTH): boolean {
  if (typeof value !== "object" || value === null) return false;
  const stack: Array<{ value: object; depth: number }> = [{ value, depth: 1 }];
  while (stack.length) {
    const { value: node, depth } = stack.pop()!;
    if (depth > limit) return true;
    const children = Array.isArray(node) ? node : Object.values(node);
    for (const child of children) {
      if (typeof child === "object" && child !== null) stack.push({ value: child, depth: depth + 1 });
    }
  }
  return false;
}

/** What a part nested beyond the limit reads as. */
export const TOO_DEEP = `[rlgate: nested deeper than ${MAX_JSON_DEPTH} levels, not shown]`;

type WithToJson = { toJSON(): unknown };
const hasToJson = (value: object): value is WithToJson => typeof (value as Partial<WithToJson>).toJSON === "function";

/** A copy of `value` as JSON.stringify would see it, with every part deeper than `limit` replaced by TOO_DEEP. */
function pruned(value: unknown, limit: number, depth: number): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (hasToJson(value)) return pruned(value.toJSON(), limit, depth);
  if (depth > limit) return TOO_DEEP;
  if (Array.isArray(value)) return value.map((item) => pruned(item, limit, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) out[key] = pruned(item, limit, depth + 1);
  return out;
}

/**
 * JSON.stringify that cannot be broken by what it is given: a value too deep for the stack (e.g. a body stored before
 * the door checked depth) is written with its too-deep parts replaced by TOO_DEEP, the rest as it is.
 */
export function boundedStringify(value: unknown, limit = MAX_JSON_DEPTH): string {
  try {
    return JSON.stringify(value);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return JSON.stringify(pruned(value, limit, 0));
  }
}
