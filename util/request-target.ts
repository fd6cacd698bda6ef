// The one reading of an HTTP request target that both the gateway and the sandbox bridge route on. A path that a
// URL parser would rewrite — dot segments, raw or percent-encoded; backslashes, which WHATWG reads as slashes;
// encoded slashes, which an upstream may decode into a separator; a leading `//`, which WHATWG reads as a host — is
// refused, never normalized: otherwise `/r/{id}/../../api/…` passes a prefix check on the raw path and is then
// routed as `/api/…` (an agent finishing its own rollout with any reward).

export class RequestTargetError extends Error {}

/** Characters RFC 3986 allows in a path (pchar and "/"); `%` only as the start of an escape, checked below. */
const PATH_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/;
/** Escapes that spell a separator, a dot, a NUL or another escape once decoded (any case). */
const DANGEROUS_ESCAPE = /%(2e|2f|5c|00|25)/i;
const ESCAPE = /%(?![0-9A-Fa-f]{2})/;

export interface RequestTarget {
  /** The path exactly as sent (and as every router sees it). */
  pathname: string;
  /** The query with its leading `?`, or "". */
  search: string;
  /** The target as a WHATWG URL (its pathname is `pathname`), for the routers that read one. */
  url: URL;
}

/** Reads an origin-form request target, or throws RequestTargetError saying why it is refused. */
export function parseRequestTarget(target: string | undefined): RequestTarget {
  const raw = target ?? "/";
  if (!raw.startsWith("/") || raw.startsWith("//"))
    throw new RequestTargetError("the request target must be a path starting with a single '/'");
  const queryAt = raw.indexOf("?");
  const pathname = queryAt < 0 ? raw : raw.slice(0, queryAt);
  const search = queryAt < 0 ? "" : raw.slice(queryAt);
  if (!PATH_CHARS.test(pathname))
    throw new RequestTargetError("the request path holds a character that is not allowed there (e.g. '\\' or a space)");
  if (ESCAPE.test(pathname)) throw new RequestTargetError("the request path holds a malformed percent-escape");
  if (DANGEROUS_ESCAPE.test(pathname))
    throw new RequestTargetError("the request path holds an encoded '.', '/', '\\', '%' or NUL; it is not normalized");
  for (const segment of pathname.split("/"))
    if (segment === "." || segment === "..")
      throw new RequestTargetError("the request path holds a '.' or '..' segment; it is not normalized");
  // What passed the rules above is what a WHATWG parser keeps; a difference would mean a rule is missing.
  let parsed: URL;
  try {
    parsed = new URL(raw, "http://rlgate.local");
  } catch {
    throw new RequestTargetError("the request target is not a valid path");
  }
  if (parsed.pathname !== pathname) throw new RequestTargetError("the request path would be rewritten by a URL parser");
  return { pathname, search, url: parsed };
}
