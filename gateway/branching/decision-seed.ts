// A branch's decision call, marked on its request for the stages after the branch check: the seed it is sampled
// with, and for a token-position point the cut (the backbone's prompt and the sampled ids kept before the position).
// Branches of one backbone reach their point with the same prompt; a server sampling with a fixed or absent seed per
// request could answer them alike (the sim is deterministic without one), so each branch's decision call carries a
// seed of its own unless the harness set one itself.
import type { IncomingMessage } from "node:http";
import type { Json } from "../upstream/fields.ts";

/** Where a token-position branch cuts the backbone's call: its prompt ids, then the first sampled ids it keeps. */
export interface TokenCut {
  rolloutId: string;
  backboneSeq: number;
  promptIds: readonly number[];
  prefixIds: readonly number[];
}

interface Decision {
  seed: number;
  cut: TokenCut | null;
}

const decisions = new WeakMap<IncomingMessage, Decision>();

export function markDecision(req: IncomingMessage, seed: number, cut: TokenCut | null = null): void {
  decisions.set(req, { seed, cut });
}

/** The cut of a token-position decision call; null for any other call. */
export function decisionCut(req: IncomingMessage): TokenCut | null {
  return decisions.get(req)?.cut ?? null;
}

/** The forwarded body, with the branch's seed when `req` is a decision call and the body sets none. */
export function branchSeeded(req: IncomingMessage, forwarded: Json): Json {
  const seed = decisions.get(req)?.seed;
  if (seed === undefined || forwarded["seed"] !== undefined) return forwarded;
  return { ...forwarded, seed };
}
