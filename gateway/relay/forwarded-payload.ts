// The bytes a captured call sends upstream. Most calls go upstream as the harness sent them plus a few fields
// (`return_token_ids`, `logprobs`): those are spliced into the harness's own bytes instead of serializing the whole
// body again — agent requests carry the whole conversation (often hundreds of kB), and re-serializing it would be
// most of rlgate's work on a call. Anything else (a changed model, a translated request) is serialized.
import { RawJson, SplicedJson } from "../../store/records.ts";
import type { Json } from "../upstream/fields.ts";

const OPEN_BRACE = 0x7b;

/**
 * The bytes that go upstream for `forwarded`, and how they are recorded: the harness's own bytes (`received`, from
 * which `body` was parsed) when nothing was added, those bytes with the added fields spliced in, or — for any
 * other change — `forwarded` serialized on its own.
 */
export function forwardedPayload(
  forwarded: Json,
  body: unknown,
  received: RawJson,
): { bytes: Uint8Array | string; record: RawJson | SplicedJson } {
  const added = addedFields(forwarded, body);
  if (added === null) {
    const bytes = JSON.stringify(forwarded);
    return { bytes, record: new RawJson(bytes) };
  }
  if (added.length === 0) return { bytes: received.bytes, record: received };
  const brace = received.bytes.indexOf(OPEN_BRACE); // a parsed object: only whitespace can precede its brace
  const fields = added.map((key) => `${JSON.stringify(key)}:${JSON.stringify(forwarded[key])}`).join(",");
  const separator = Object.keys(body as Json).length === 0 ? "" : ",";
  const spliced = new SplicedJson(received, brace + 1, Buffer.from(fields + separator));
  return { bytes: spliced.bytes, record: spliced };
}

/**
 * The keys `forwarded` adds to `received` when it holds every key of `received` with the very same value (the same
 * object, for objects) and nothing else changed; null when it differs in any other way.
 */
function addedFields(forwarded: Json, received: unknown): string[] | null {
  if (typeof received !== "object" || received === null || Array.isArray(received)) return null;
  const original = received as Json;
  let kept = 0;
  for (const key in original) {
    if (!Object.hasOwn(original, key)) continue;
    if (!Object.hasOwn(forwarded, key) || forwarded[key] !== original[key]) return null;
    kept++;
  }
  const added: string[] = [];
  for (const key in forwarded) {
    if (Object.hasOwn(forwarded, key) && !Object.hasOwn(original, key)) {
      if (forwarded[key] === undefined) return null; // JSON.stringify would drop it
      added.push(key);
    }
  }
  return Object.keys(forwarded).length === kept + added.length ? added : null;
}
