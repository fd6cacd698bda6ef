// Header hygiene between harness, gateway and upstream. Hop-by-hop and transport headers belong to one connection
// and never travel on (RFC 9110 §7.6.1): a harness's `Expect: 100-continue` is answered by the gateway itself (Node
// sends the 100), and forwarding it would make undici refuse the request. No value shaped like a rollout key
// travels upstream, nor the control token, whatever header carries it.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import { carriesSecret } from "./secrets.ts";

const HOP_BY_HOP = new Set([
  "connection",
  "expect",
  "keep-alive",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
  "http2-settings",
]);

/** The names a `Connection` header lists are hop-by-hop for this message too. */
function connectionListed(headers: Record<string, string | string[] | number | undefined>): Set<string> | null {
  const value = headers["connection"];
  if (typeof value !== "string") return null;
  const names = new Set(
    value
      .split(",")
      .map((name) => name.trim().toLowerCase())
      .filter(Boolean),
  );
  return names.size ? names : null;
}

/** True for a header that belongs to one connection (hop-by-hop, proxy-*, or named by `Connection`). */
export function isHopByHop(name: string, listed: Set<string> | null = null): boolean {
  return HOP_BY_HOP.has(name) || name.startsWith("proxy-") || (listed !== null && listed.has(name));
}

/** Headers forwarded upstream: the harness's own, minus hop-by-hop, rlgate's, and compression (capture parses). */
export function upstreamRequestHeaders(
  headers: IncomingHttpHeaders,
  options: { dropAuthorization: boolean; apiKey: string | undefined; controlToken: string | null },
): Record<string, string> {
  const out: Record<string, string> = {};
  const listed = connectionListed(headers);
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || isHopByHop(name, listed) || name.startsWith("x-rlgate-")) continue;
    if (name === "accept-encoding" || carriesSecret(value, options.controlToken)) continue;
    if (options.dropAuthorization && (name === "authorization" || name === "x-api-key")) continue;
    out[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  if (options.apiKey) out["authorization"] = `Bearer ${options.apiKey}`;
  out["content-type"] = "application/json";
  out["accept-encoding"] = "identity";
  return out;
}

/**
 * The same hygiene for a pass-through request, whose headers http-proxy forwards as they are: removes, in place,
 * what must not travel upstream.
 */
export function scrubPassthroughHeaders(
  headers: IncomingHttpHeaders,
  dropAuthorization: boolean,
  controlToken: string | null,
): void {
  const listed = connectionListed(headers);
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    // http-proxy manages the upstream connection itself; host and length are rewritten or kept by it.
    const hop =
      name !== "host" && name !== "content-length" && name !== "transfer-encoding" && isHopByHop(name, listed);
    if (hop || name.startsWith("x-rlgate-") || carriesSecret(value, controlToken)) delete headers[name];
    else if (dropAuthorization && (name === "authorization" || name === "x-api-key")) delete headers[name];
  }
}

/** Response headers passed to the harness: the upstream's, minus hop-by-hop and length (rlgate may rewrite). */
export function harnessResponseHeaders(headers: Record<string, string | string[] | undefined>): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const listed = connectionListed(headers);
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || isHopByHop(name, listed)) continue;
    out[name] = value;
  }
  return out;
}
