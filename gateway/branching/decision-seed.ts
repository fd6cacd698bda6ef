// The seed a branch's decision call is sampled with. Branches of one backbone reach their point with the same prompt;
// a server sampling with a fixed or absent seed per request could answer them alike (the sim is deterministic without
// one), so each branch's decision call carries a seed of its own unless the harness set one itself.
import type { IncomingMessage } from "node:http";
import type { Json } from "../upstream/fields.ts";

const decisions = new WeakMap<IncomingMessage, number>();

export function markDecision(req: IncomingMessage, seed: number): void {
  decisions.set(req, seed);
}

/** The forwarded body, with the branch's seed when `req` is a decision call and the body sets none. */
export function branchSeeded(req: IncomingMessage, forwarded: Json): Json {
  const seed = decisions.get(req);
  if (seed === undefined || forwarded["seed"] !== undefined) return forwarded;
  return { ...forwarded, seed };
}
