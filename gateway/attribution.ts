// Which rollout a harness call belongs to. Three ways, checked in this order:
//   path   /r/{rolloutId}/v1/...          (the base URL handed to the harness)
//   header x-rlgate-rollout: {rolloutId}
//   key    Authorization: Bearer rlk_..., x-api-key: rlk_..., or, as Gemini clients send their key, x-goog-api-key: rlk_...
//          or ?key=rlk_...   (a rollout key reaches only its own rollout)
import type { IncomingHttpHeaders } from "node:http";
import { authCredentials } from "../util/secrets.ts";
import { GatewayError } from "./errors.ts";

export const ROLLOUT_KEY_PREFIX = "rlk_";
const PATH_PREFIX = /^\/r\/([A-Za-z0-9._~-]{1,128})(\/.*)?$/;

export interface Attribution {
  rolloutId: string | null;
  via: "path" | "header" | "key" | null;
  /** The request path with any /r/{id} prefix removed: what the upstream is asked for. */
  routePath: string;
  /** True when the harness authenticated with rlgate's credentials (a rollout key, the control token): never sent upstream. */
  usedRolloutKey: boolean;
}

export interface RolloutLookup {
  rolloutExists(id: string): boolean;
  rolloutIdForKey(key: string): string | undefined;
}

function presentedKey(headers: IncomingHttpHeaders, queryKey: string | null): string | null {
  // `bearer`, `BEARER`: scheme names are case-insensitive, and a key missed here would travel upstream.
  const token = authCredentials(headers["authorization"]);
  if (token?.startsWith(ROLLOUT_KEY_PREFIX)) return token;
  for (const apiKey of [headers["x-api-key"], headers["x-goog-api-key"], queryKey]) {
    if (typeof apiKey === "string" && apiKey.trim().startsWith(ROLLOUT_KEY_PREFIX)) return apiKey.trim();
  }
  return null;
}

/** Splits off a /r/{id} prefix without consulting the store (used for routing). */
export function splitRolloutPath(path: string): { rolloutId: string | null; routePath: string } {
  const match = PATH_PREFIX.exec(path);
  if (!match) return { rolloutId: null, routePath: path };
  return { rolloutId: match[1]!, routePath: match[2] ?? "/" };
}

/** `queryKey`: the request's `key` query parameter, read before the query is scrubbed of secrets (Gemini's `?key=`). */
export function attribute(
  path: string,
  headers: IncomingHttpHeaders,
  lookup: RolloutLookup,
  queryKey: string | null = null,
): Attribution {
  const { rolloutId: fromPath, routePath } = splitRolloutPath(path);
  const key = presentedKey(headers, queryKey);
  const keyRollout = key ? lookup.rolloutIdForKey(key) : undefined;
  if (key && keyRollout === undefined) {
    throw new GatewayError("RLGATE_UNAUTHORIZED", "unknown rollout key: it matches no rollout in this gateway's store");
  }
  const header = headers["x-rlgate-rollout"];
  const fromHeader = typeof header === "string" && header.length ? header : null;

  const claimed = fromPath ?? fromHeader;
  if (claimed !== null) {
    // A key pins the call to its own rollout: it may not be used to write into another one.
    if (keyRollout !== undefined && keyRollout !== claimed) {
      throw new GatewayError("RLGATE_UNAUTHORIZED", `this rollout key belongs to another rollout than '${claimed}'`);
    }
    if (!lookup.rolloutExists(claimed)) {
      throw new GatewayError(
        "RLGATE_UNKNOWN_ROLLOUT",
        `unknown rollout '${claimed}': create it first with POST /api/rollouts`,
      );
    }
    return { rolloutId: claimed, via: fromPath ? "path" : "header", routePath, usedRolloutKey: key !== null };
  }
  if (keyRollout !== undefined) return { rolloutId: keyRollout, via: "key", routePath, usedRolloutKey: true };
  return { rolloutId: null, via: null, routePath, usedRolloutKey: false };
}
