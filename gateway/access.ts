// Who may do what at the gateway's door. The control API (and /metrics unless --metrics-public) needs the control
// token when one is set; with --require-key (on by default with a token or beyond loopback) a harness call needs its
// rollout's key, so that reaching the port is not enough to write into a rollout; a finished rollout takes no calls.
import type { IncomingMessage } from "node:http";
import { authCredentials, sameSecret } from "../util/secrets.ts";
import type { Attribution } from "./attribution.ts";
import type { GatewayContext } from "./context.ts";
import { GatewayError } from "./errors.ts";

/** True when the request carries the control token (`Authorization: Bearer <token>`, any case of the scheme). */
function hasControlToken(ctx: Pick<GatewayContext, "config">, req: IncomingMessage): boolean {
  const token = ctx.config.controlToken;
  return token !== null && sameSecret(authCredentials(req.headers["authorization"]), token);
}

export function checkControlToken(
  ctx: Pick<GatewayContext, "config">,
  req: IncomingMessage,
  what = "the control API",
): void {
  if (ctx.config.controlToken === null || hasControlToken(ctx, req)) return;
  throw new GatewayError("RLGATE_UNAUTHORIZED", `${what} needs 'Authorization: Bearer <token>' (--token)`);
}

/**
 * With --require-key, a harness call carries its rollout's key (or the control token, for the trusted driver).
 * Returns the attribution with `usedRolloutKey` also set when the control token was presented: rlgate's credentials,
 * key or token, never travel upstream.
 */
export function checkHarnessAccess(
  ctx: Pick<GatewayContext, "config">,
  req: IncomingMessage,
  attribution: Attribution,
): Attribution {
  const controlToken = hasControlToken(ctx, req);
  if (!ctx.config.requireKey || attribution.usedRolloutKey || controlToken) {
    return controlToken ? { ...attribution, usedRolloutKey: true } : attribution;
  }
  throw new GatewayError(
    "RLGATE_UNAUTHORIZED",
    "this gateway requires the rollout's key on every harness call: send 'Authorization: Bearer rlk_…', 'x-api-key: rlk_…' or, from a Gemini client, 'x-goog-api-key: rlk_…' (the key POST /api/rollouts returned)",
  );
}

/** The rollout a call is attributed to must still be open: a finished rollout's trajectories are already out. */
export function finishedRolloutError(
  ctx: Pick<GatewayContext, "store">,
  attribution: Attribution,
): GatewayError | null {
  if (attribution.rolloutId === null) return null;
  const status = ctx.store.getRollout(attribution.rolloutId)?.status;
  if (status === undefined || status === "open") return null;
  return new GatewayError(
    "RLGATE_ROLLOUT_FINISHED",
    `rollout '${attribution.rolloutId}' is finished (${status}) and takes no more calls`,
  );
}
