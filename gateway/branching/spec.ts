// A branch rollout's settings, as the control API takes them (`branch` on create) and as they are kept: in the
// rollout's metadata under `branch`, so every gateway worker, the control API's readers and the RL core see them.
import { z } from "zod";
import type { CallRecord, RolloutRecord } from "../../store/records.ts";
import type { Store } from "../../store/store.ts";
import { GatewayError } from "../errors.ts";

export const DIVERGENCE_ACTIONS = ["sample", "drop"] as const;
export type DivergenceAction = (typeof DIVERGENCE_ACTIONS)[number];

export const branchInputSchema = z
  .object({
    /** The backbone rollout (finished) whose recorded answers are replayed. */
    of: z.string().min(1).max(128),
    /** The decision point: the backbone's call at this position (0-based, among its calls that ended ok). */
    at_call: z.number().int().nonnegative(),
    /**
     * A token position inside the decision call (tokens prompt mode): the branch keeps the backbone's first `at_token`
     * sampled ids of that call (its first choice) and samples on from there. Absent: the whole call is sampled anew.
     */
    at_token: z.number().int().nonnegative().optional(),
    /** What a prompt that differs from the backbone's before the point does: sample on from there, or drop. */
    on_divergence: z.enum(DIVERGENCE_ACTIONS).default("sample"),
    /** Seed the decision call is sampled with when the harness sets none (default: drawn from the rollout id). */
    seed: z
      .number()
      .int()
      .nonnegative()
      .max(2 ** 31 - 1)
      .optional(),
  })
  .strict();
export type BranchInput = z.infer<typeof branchInputSchema>;

/** How the branch left the backbone's path before its point (recorded on the rollout). */
export interface Divergence {
  /** The branch's call that differed (its position among the branch's model calls, 0-based). */
  at: number;
  reason: string;
  action: DivergenceAction;
}

/** Kept as JSON in the rollout's metadata, hence snake_case like the rest of the control API. */
export interface BranchSpec {
  of: string;
  at_call: number;
  /** The backbone call at the decision point. */
  call_seq: number;
  /** The token position inside it (tokens mode); absent for a call-level point. */
  at_token?: number;
  on_divergence: DivergenceAction;
  seed: number;
  divergence?: Divergence | null;
}

/** The calls of a backbone a branch can replay: those that ended ok with token ids, in the order they were made. */
export function replayableCalls(calls: readonly CallRecord[]): CallRecord[] {
  return calls.filter((c) => c.status === "ok" && c.promptTokenIds !== null).sort((a, b) => a.seq - b.seq);
}

function seedOf(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193) >>> 0;
  return h & 0x7fffffff;
}

/** Checks a branch request against its backbone and gives what is kept in the new rollout's metadata. */
export function resolveBranch(
  store: Store,
  rolloutId: string,
  input: BranchInput,
  promptMode: "messages" | "tokens",
): BranchSpec {
  const backbone = store.getRollout(input.of);
  const bad = (message: string) => new GatewayError("RLGATE_BAD_REQUEST", `branch: ${message}`, { param: "branch" });
  if (!backbone) throw bad(`unknown backbone rollout '${input.of}'`);
  if (backbone.status === "open") throw bad(`the backbone rollout '${input.of}' is still open: branch a finished one`);
  if (branchOf(backbone)) throw bad(`'${input.of}' is itself a branch: branch its backbone`);
  const calls = replayableCalls(store.listCalls(input.of));
  const point = calls[input.at_call];
  if (!point)
    throw bad(`at_call ${input.at_call} is past the backbone's ${calls.length} replayable call(s) (0-based positions)`);
  if (input.at_token !== undefined) tokenPointProblem(point, input.at_token, promptMode, bad);
  return {
    of: input.of,
    at_call: input.at_call,
    call_seq: point.seq,
    ...(input.at_token === undefined ? {} : { at_token: input.at_token }),
    on_divergence: input.on_divergence,
    seed: input.seed ?? seedOf(rolloutId),
    divergence: null,
  };
}

/**
 * A token position is served only where the gateway renders the prompt itself (tokens mode): in messages mode the
 * upstream renders the chat, and its chat route cannot be asked to continue an assistant turn from given ids.
 */
function tokenPointProblem(
  point: CallRecord,
  atToken: number,
  promptMode: "messages" | "tokens",
  bad: (message: string) => Error,
): void {
  if (promptMode !== "tokens")
    throw bad("at_token needs the gateway in --prompts tokens (in messages mode the upstream renders the prompt)");
  if (point.prompt?.mode !== "tokens")
    throw bad(
      `the backbone's call ${point.seq} was not served from tokens (${point.prompt?.fallbackReason ?? "messages mode"})`,
    );
  const sampled = point.choices[0]?.tokenIds.length ?? 0;
  if (atToken >= sampled)
    throw bad(`at_token ${atToken} is past the ${sampled} token(s) the backbone's call ${point.seq} sampled`);
}

/** The branch settings of a rollout; null for an ordinary rollout. */
export function branchOf(rollout: RolloutRecord | undefined): BranchSpec | null {
  const value = rollout?.metadata?.["branch"];
  if (typeof value !== "object" || value === null) return null;
  const spec = value as Partial<BranchSpec>;
  return typeof spec.of === "string" && typeof spec.call_seq === "number" ? (spec as BranchSpec) : null;
}
