// Reasoning handed to a client in the field its API keeps opaque and echoes back — the Responses API's
// `reasoning.encrypted_content`, Gemini's `thoughtSignature` — so that a later request that replays the field gives
// rlgate back what the model thought, even from a client that drops the reasoning text itself (Gemini CLI keeps the
// signature and drops thought parts). rlgate encrypts and signs nothing: the field is the text, base64.
const MARKER = "rlgate.v1.";

/** Responses' `encrypted_content`: the marker, then the text in base64. */
export function encodeReasoning(text: string): string {
  return MARKER + Buffer.from(text, "utf8").toString("base64");
}

export function decodeReasoning(value: unknown): string | null {
  if (typeof value !== "string" || !value.startsWith(MARKER)) return null;
  return Buffer.from(value.slice(MARKER.length), "base64").toString("utf8");
}

/** Gemini's `thoughtSignature` is bytes (base64 in JSON; SDKs decode it): the marker and the text, base64 together. */
export function reasoningSignature(text: string): string {
  return Buffer.from(MARKER + text, "utf8").toString("base64");
}

/** The reasoning a signature rlgate wrote carries; null for any other signature (a real Gemini one, a placeholder). */
export function reasoningOfSignature(value: unknown): string | null {
  if (typeof value !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) return null;
  const decoded = Buffer.from(value, "base64").toString("utf8");
  return decoded.startsWith(MARKER) ? decoded.slice(MARKER.length) : null;
}
