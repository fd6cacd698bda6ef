// Secrets rlgate knows — the control token and rollout keys — never leave it towards the upstream, wherever a client
// put them: any header (not only the ones rlgate reads: `api-key`, `x-goog-api-key`, custom ones), a query parameter,
// or the request body (an agent that ran `env` sends its key back inside a tool result).
import { ROLLOUT_KEY_PREFIX } from "./attribution.ts";

/** What the gateway holds secret: its control token (if any) and which `rlk_…` strings are its rollouts' keys. */
export interface KnownSecrets {
  controlToken: string | null;
  isRolloutKey(candidate: string): boolean;
}

/** True when a header value carries the control token or anything shaped like a rollout key. */
export function carriesSecret(value: string | string[], controlToken: string | null): boolean {
  const values = Array.isArray(value) ? value : [value];
  return values.some((v) => v.includes(ROLLOUT_KEY_PREFIX) || (controlToken !== null && v.includes(controlToken)));
}

/** The query without the parameters whose name or value carries a secret (decoded, so no escape hides one). */
export function scrubQuery(search: string, controlToken: string | null): string {
  if (search === "" || search === "?") return search;
  const kept: string[] = [];
  for (const pair of search.slice(1).split("&")) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(pair.replace(/\+/g, " "));
    } catch {
      decoded = pair;
    }
    if (!carriesSecret([pair, decoded], controlToken)) kept.push(pair);
  }
  return kept.length ? `?${kept.join("&")}` : "";
}

/** A request target without one query parameter (every occurrence, whatever its value). */
export function withoutQueryParameter(target: string, name: string): string {
  const at = target.indexOf("?");
  if (at < 0) return target;
  const kept = target
    .slice(at + 1)
    .split("&")
    .filter((pair) => pair.split("=")[0] !== name);
  return kept.length ? `${target.slice(0, at)}?${kept.join("&")}` : target.slice(0, at);
}

const KEY_CHAR = /[A-Za-z0-9_-]/;
const PREFIX = Buffer.from(ROLLOUT_KEY_PREFIX);

/**
 * Overwrites, in place, every occurrence in a request body of the control token and of this gateway's rollout keys
 * with `*` (same length, so JSON stays valid and offsets stay put). The body is then recorded and forwarded as
 * redacted: the model never sees a key, and the store never holds one a call carried. Bodies without the key prefix
 * or the token cost one search each.
 */
export function redactSecrets(body: Buffer, secrets: KnownSecrets): Buffer {
  for (let at = body.indexOf(PREFIX); at >= 0; at = body.indexOf(PREFIX, at + 1)) {
    let end = at + PREFIX.length;
    while (end < body.length && KEY_CHAR.test(String.fromCharCode(body[end]!))) end++;
    if (end > at + PREFIX.length && secrets.isRolloutKey(body.toString("latin1", at, end)))
      body.fill(0x2a, at + PREFIX.length, end);
  }
  const token = secrets.controlToken;
  if (token) {
    const needle = Buffer.from(token);
    for (let at = body.indexOf(needle); at >= 0; at = body.indexOf(needle, at + needle.length))
      body.fill(0x2a, at, at + needle.length);
  }
  return body;
}
