// GET /api/rollouts: a page of rollouts, newest first, searched and filtered in the store (store/rollout-search.ts).
//   ?limit=N        at most N (default: all)
//   ?q=TEXT         TEXT in the id, group, harness, task or status (case-insensitive)
//   ?status=S       ?group=G   exact
//   ?cursor=C       the page after the one whose next_cursor was C
// The answer holds `total` (the rollouts that match in the whole store) and `next_cursor` (null on the last page).
import { GatewayError } from "./errors.ts";
import type { RolloutPageRequest } from "../store/rollout-search.ts";

const MAX_QUERY = 512;

/** `?limit=`: absent, or a positive integer. */
function limitParam(url: URL): number | undefined {
  const text = url.searchParams.get("limit");
  if (text === null || text === "") return undefined;
  const limit = Number(text);
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new GatewayError("RLGATE_BAD_REQUEST", "limit: expected a positive integer", { param: "limit" });
  }
  return limit;
}

const textParam = (url: URL, name: string) => url.searchParams.get(name)?.trim() || undefined;

export function rolloutPageRequest(url: URL): RolloutPageRequest {
  const query = textParam(url, "q");
  if (query && query.length > MAX_QUERY)
    throw new GatewayError("RLGATE_BAD_REQUEST", `q: at most ${MAX_QUERY} characters`, { param: "q" });
  return {
    limit: limitParam(url),
    query,
    status: textParam(url, "status"),
    group: url.searchParams.get("group") ?? undefined,
    cursor: textParam(url, "cursor"),
  };
}
