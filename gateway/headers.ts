// Header hygiene between harness, gateway and upstream.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
]);

/** Headers forwarded upstream: the harness's own, minus hop-by-hop, rlgate's, and compression (capture parses). */
export function upstreamRequestHeaders(
  headers: IncomingHttpHeaders,
  options: { dropAuthorization: boolean; apiKey: string | undefined },
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name.startsWith("x-rlgate-")) continue;
    if (name === "accept-encoding") continue;
    if (options.dropAuthorization && (name === "authorization" || name === "x-api-key")) continue;
    out[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  if (options.apiKey) out["authorization"] = `Bearer ${options.apiKey}`;
  out["content-type"] = "application/json";
  out["accept-encoding"] = "identity";
  return out;
}

/** Response headers passed to the harness: the upstream's, minus hop-by-hop and length (rlgate may rewrite). */
export function harnessResponseHeaders(headers: Record<string, string | string[] | undefined>): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    out[name] = value;
  }
  return out;
}
