// Chat-completions message content built from a foreign API's parts (Messages blocks, Gemini parts).
import type { Json } from "../upstream/fields.ts";

/** One content value from parts: a string for a single text part (what most clients send), else the parts. */
export function contentOf(parts: Json[]): string | Json[] {
  const [only] = parts;
  return parts.length === 1 && only?.["type"] === "text" ? String(only["text"]) : parts;
}
