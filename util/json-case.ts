// The control API speaks snake_case (`created_at`, `token_ids`), as the OpenAI-style APIs around it do, while the
// records keep their TypeScript names. This is the one view at the API boundary, and its inverse for readers of the
// API (rlgate show). Fields that hold someone else's JSON (the harness's and the upstream's bodies, the user's
// metadata) are passed through untouched: their keys are not ours to rename.
const OPAQUE = ["metadata", "requestReceived", "requestForwarded", "response", "upstreamResponse"];

const camelToSnake = (key: string): string => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
// Keys that are values of ours (a segment or break kind, a status) in maps such as break counts: never renamed.
const ENUM_KEYS = new Set(["sub_agent", "upstream_error", "client_aborted", "infra_error"]);
const snakeToCamel = (key: string): string =>
  ENUM_KEYS.has(key) ? key : key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

const OPAQUE_CAMEL = new Set(OPAQUE);
const OPAQUE_SNAKE = new Set(OPAQUE.map(camelToSnake));

function convert(value: unknown, rename: (key: string) => string, opaque: ReadonlySet<string>): unknown {
  if (value === null || typeof value !== "object") return value;
  // Bytes of ours (a call's routed experts): base64, not an object of numbered keys.
  if (ArrayBuffer.isView(value))
    return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64");
  if (Array.isArray(value)) {
    // Token arrays are long and flat: no walk through numbers.
    return value.length > 0 && typeof value[0] !== "object" ? value : value.map((v) => convert(v, rename, opaque));
  }
  const json = (value as { toJSON?: () => unknown }).toJSON;
  if (typeof json === "function") return convert(json.call(value), rename, opaque);
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) out[rename(key)] = opaque.has(key) ? v : convert(v, rename, opaque);
  return out;
}

/** The API's view of a record (or anything holding records): every key of ours in snake_case. */
export function toSnakeCase(value: unknown): unknown {
  return convert(value, camelToSnake, OPAQUE_CAMEL);
}

/** A record back from the API's view (the inverse of toSnakeCase). */
export function fromSnakeCase<T>(value: unknown): T {
  return convert(value, snakeToCamel, OPAQUE_SNAKE) as T;
}
