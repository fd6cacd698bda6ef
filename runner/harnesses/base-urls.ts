// The rollout's base URLs as a harness is given them (path-scoped: the gateway needs no credentials on them; the
// runner's bridge adds the rollout key when it has one), and the placeholder key for CLIs that insist on one.
import type { HarnessContext } from "./types.ts";

export const openaiBase = (ctx: HarnessContext): string => `${ctx.origin}/r/${ctx.rolloutId}/v1`;
export const anthropicBase = (ctx: HarnessContext): string => `${ctx.origin}/r/${ctx.rolloutId}`;
export const PLACEHOLDER_KEY = "sk-rlgate-sandbox";
