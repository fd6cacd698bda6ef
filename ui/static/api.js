// @ts-check
// The control API as the page reads it: the token travels in a header (never in a URL), answers come back in
// camelCase (util/json-case.ts's inverse), and a 401 is its own error so the page can ask for the token.

/** The control token for this tab (sessionStorage keeps it across reloads). */
export const auth = { token: /** @type {string | null} */ (null) };

export class Unauthorized extends Error {}

/**
 * @param {Record<string, string>} [extra]
 * @returns {Record<string, string>}
 */
export function headers(extra = {}) {
  return auth.token ? { authorization: `Bearer ${auth.token}`, ...extra } : extra;
}

// Bodies and metadata that belong to the harness, the upstream or the user keep their keys.
const OPAQUE = new Set(["metadata", "request_received", "request_forwarded", "response", "upstream_response"]);
// Keys that are values (a segment or break kind, a status) in maps such as break counts.
const ENUM_KEYS = new Set(["sub_agent", "upstream_error", "client_aborted", "infra_error"]);

/**
 * snake_case keys to camelCase, deeply (arrays of numbers are handed back as they are).
 * @param {unknown} value
 * @returns {any}
 */
export function camel(value) {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.length > 0 && typeof value[0] !== "object" ? value : value.map(camel);
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const [key, v] of Object.entries(value)) {
    const name = ENUM_KEYS.has(key) ? key : key.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
    out[name] = OPAQUE.has(key) ? v : camel(v);
  }
  return out;
}

/**
 * @param {string} path
 * @param {RequestInit & { headers?: Record<string, string> }} [init]
 * @returns {Promise<any>}
 */
export async function api(path, init = {}) {
  const res = await fetch(path, { ...init, headers: headers(init.headers || {}) });
  if (res.status === 401) throw new Unauthorized("the gateway needs its control token");
  const body = await res.json();
  if (!res.ok) throw new Error(body?.error?.message || `HTTP ${res.status}`);
  return camel(body);
}

/**
 * The gateway's Prometheus figures (GET /metrics), by series name with its labels as written.
 * @returns {Promise<Map<string, number>>}
 */
export async function metrics() {
  const res = await fetch("/metrics", { headers: headers() });
  if (res.status === 401) throw new Unauthorized("the gateway needs its control token");
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  const out = new Map();
  for (const line of (await res.text()).split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const space = line.lastIndexOf(" ");
    out.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return out;
}
