// Branch rollouts (docs/runner.md#branching): a harness run again from the start, in a fresh sandbox, whose calls
// before the decision point are answered with the backbone rollout's recorded answers (no upstream call) while its
// tools really run. A call is replayed only when its identity equals a backbone call's (identity.ts); one that
// differs is a divergence, recorded on the rollout, after which the branch samples on or is dropped. At the point
// the call goes to the model (with the branch's seed, decision-seed.ts) and so does every call after it; a point at
// a token position (tokens mode) keeps the backbone's sampled ids before it as prompt (decisionPrefix, read by the
// tokens prompt mode), and the harness gets them back in front of the continuation.
//
// A replayed call is recorded on the branch with its origin (`replayOf`) and with the backbone's ids as context:
// its prompt ids are the backbone call's prompt followed by the answer's sampled ids, and its choices carry no
// sampled ids of their own. Those tokens were sampled, and are trained, in the backbone; in the branch they are what
// the model was given, so reconstruction puts them on the branch's path as context (mask 0) and the RL core's group
// tree (one trie over the group's rows) joins the branch to the backbone where their ids agree.
import type { IncomingMessage } from "node:http";
import { LRUCache } from "lru-cache";
import { RawJson, type ApiSurface, type CallRecord, type PromptRecord } from "../../store/records.ts";
import type { GatewayContext } from "../context.ts";
import { GatewayError } from "../errors.ts";
import type { HarnessCall } from "../relay/exchange.ts";
import { branchSeeded, decisionCut, markDecision, type TokenCut } from "./decision-seed.ts";
import { askTopLogprobs, withTopLogprobs } from "./entropy.ts";
import type { Json } from "../upstream/fields.ts";
import { callIdentity, firstDifference } from "./identity.ts";
import { replayBody, sendReplay, unreplayable } from "./replay-answer.ts";
import { branchOf, replayableCalls, type BranchSpec, type Divergence } from "./spec.ts";

export { branchInputSchema, resolveBranch, branchOf, type BranchInput, type BranchSpec } from "./spec.ts";
export { type TokenCut } from "./decision-seed.ts";
export { checkEntropyTopK, chatEntropies } from "./entropy.ts";

/** What branching adds to a forwarded body: a decision call's seed, a backbone's top-logprob request. */
export function branchForwarded(req: IncomingMessage, forwarded: Json, upstreamPath: string): Json {
  return withTopLogprobs(req, branchSeeded(req, forwarded), upstreamPath);
}

interface BackboneCall {
  seq: number;
  identity: string;
}

/** Where a branch stands: replaying (with the backbone calls used so far), or past its point. */
interface BranchState {
  /** Backbone seq -> the branch's seq of the call that replayed it. */
  replayed: Map<number, number>;
  /** The branch's model calls so far (replayed or not). */
  calls: number;
  sampling: boolean;
}

/** Per gateway (store): backbones' call identities (finished rollouts do not change) and branches' states. */
class Branching {
  readonly backbones = new LRUCache<string, BackboneCall[]>({ max: 256 });
  readonly states = new LRUCache<string, BranchState>({ max: 4096 });
}
const perStore = new WeakMap<object, Branching>();

function branchingOf(ctx: Pick<GatewayContext, "store">): Branching {
  let b = perStore.get(ctx.store);
  if (!b) perStore.set(ctx.store, (b = new Branching()));
  return b;
}

function backboneCalls(ctx: Pick<GatewayContext, "store">, b: Branching, id: string): BackboneCall[] {
  let calls = b.backbones.get(id);
  if (!calls) {
    calls = replayableCalls(ctx.store.listCalls(id)).map((c) => ({
      seq: c.seq,
      identity: callIdentity(c.api, plain(c.requestReceived)),
    }));
    b.backbones.set(id, calls);
  }
  return calls;
}

function plain(body: unknown): unknown {
  return body instanceof RawJson ? body.value() : body;
}

/**
 * The branch's state. While it replays, it is read from its stored calls each time (with gateway workers another
 * worker may have served the call before; a replayed call is stored before its answer is sent); once it samples, the
 * state in memory says so (the decision call is recorded only when it ends), and nothing is read any more.
 */
function stateOf(ctx: Pick<GatewayContext, "store">, b: Branching, rolloutId: string, spec: BranchSpec): BranchState {
  const cached = b.states.get(rolloutId);
  if (cached?.sampling) return cached;
  const calls = ctx.store.listCalls(rolloutId).filter((c) => c.status !== "rejected");
  const state: BranchState = {
    replayed: new Map(calls.filter((c) => c.replayOf).map((c) => [c.replayOf!.seq, c.seq])),
    calls: Math.max(calls.length, cached?.calls ?? 0),
    sampling: Boolean(spec.divergence) || calls.some((c) => !c.replayOf),
  };
  b.states.set(rolloutId, state);
  return state;
}

/** Records the divergence on the rollout (metadata.branch.divergence), once. */
async function recordDivergence(
  ctx: Pick<GatewayContext, "store" | "log">,
  rolloutId: string,
  divergence: Divergence,
): Promise<void> {
  const rollout = ctx.store.getRollout(rolloutId);
  const spec = branchOf(rollout);
  if (!rollout || !spec || spec.divergence) return;
  await ctx.store.putRollout({ ...rollout, metadata: { ...rollout.metadata, branch: { ...spec, divergence } } });
  ctx.log.info({ rollout: rolloutId, ...divergence }, "branch diverged from its backbone");
}

/** Its prompt record with the backbone's call numbers changed to the branch's (token threads continue from it). */
function remappedPrompt(prompt: PromptRecord | undefined, replayed: Map<number, number>): PromptRecord | undefined {
  if (!prompt) return undefined;
  const parent = prompt.parent ? replayed.get(prompt.parent.seq) : undefined;
  const thread = prompt.thread === undefined ? undefined : replayed.get(prompt.thread);
  return {
    ...prompt,
    ...(prompt.parent !== undefined
      ? { parent: parent === undefined ? null : { ...prompt.parent!, seq: parent } }
      : {}),
    ...(prompt.thread !== undefined ? { thread: thread ?? prompt.thread } : {}),
  };
}

/** The branch's record of a replayed call (see the head of this file). */
function replayRecord(
  ctx: Pick<GatewayContext, "store">,
  call: HarnessCall,
  api: ApiSurface,
  from: CallRecord,
  state: BranchState,
) {
  const seq = ctx.store.nextCallSeq();
  const first = from.choices[0];
  const record: CallRecord = {
    seq,
    rolloutId: call.attribution.rolloutId,
    api,
    path: call.req.url ?? "",
    stream: from.stream,
    model: from.model,
    status: "ok",
    httpStatus: 200,
    error: null,
    requestReceived: new RawJson(call.rawBody),
    requestForwarded: null,
    response: from.response,
    ...(from.upstreamResponse === undefined ? {} : { upstreamResponse: from.upstreamResponse }),
    promptTokenIds: [...from.promptTokenIds!, ...(first?.tokenIds ?? [])],
    choices: from.choices.map((c) => ({ index: c.index, tokenIds: [], logprobs: [], finishReason: c.finishReason })),
    tokenSource: from.tokenSource,
    tokenIssue: from.tokenIssue,
    policyVersion: from.policyVersion ?? null,
    sampling: from.sampling ?? null,
    timings: {
      start: call.startEpoch,
      upstreamStart: null,
      firstByte: null,
      firstToken: null,
      end: Date.now(),
      overheadMs: Math.round((performance.now() - call.startPerf) * 1000) / 1000,
    },
    ...(from.tools === undefined ? {} : { tools: from.tools }),
    ...(from.prompt ? { prompt: remappedPrompt(from.prompt, state.replayed)! } : {}),
    replayOf: { rolloutId: from.rolloutId!, seq: from.seq },
  };
  return record;
}

function tokenCutOf(ctx: Pick<GatewayContext, "store">, rolloutId: string, spec: BranchSpec): TokenCut | null {
  if (spec.at_token === undefined) return null;
  const point = ctx.store.getCall(spec.of, spec.call_seq);
  if (!point?.promptTokenIds) return null;
  return {
    rolloutId,
    backboneSeq: point.seq,
    promptIds: point.promptTokenIds,
    prefixIds: (point.choices[0]?.tokenIds ?? []).slice(0, spec.at_token),
  };
}

/**
 * The sampled ids a token-position decision call keeps before sampling on ([] for any other call), given the prompt
 * ids tokens mode rendered for it. They continue the backbone's call only if that prompt is the backbone's: one that
 * differs (the branch's thread came out otherwise) is a divergence, and the call is sampled from its start, or the
 * branch dropped, as the branch says.
 */
export async function decisionPrefix(
  ctx: Pick<GatewayContext, "store" | "log">,
  req: IncomingMessage,
  promptIds: readonly number[],
): Promise<readonly number[]> {
  const cut = decisionCut(req);
  if (!cut) return [];
  if (sameIds(promptIds, cut.promptIds)) return cut.prefixIds;
  const spec = branchOf(ctx.store.getRollout(cut.rolloutId));
  const divergence: Divergence = {
    at: spec?.at_call ?? -1,
    reason: `the decision call's prompt ids differ from those of the backbone's call ${cut.backboneSeq}`,
    action: spec?.on_divergence ?? "sample",
  };
  await recordDivergence(ctx, cut.rolloutId, divergence);
  if (divergence.action === "drop")
    throw new GatewayError(
      "RLGATE_CONFLICT",
      `branch rollout '${cut.rolloutId}' diverged from its backbone at its decision point (${divergence.reason}): dropped`,
    );
  return [];
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Answers a branch rollout's call from its backbone when it comes before the decision point and matches; true when
 * it did (the harness has its answer). False: the call goes upstream as usual. A dropped branch's calls are refused.
 */
export async function answerFromBackbone(
  ctx: Pick<GatewayContext, "store" | "log" | "metrics" | "repair">,
  call: HarnessCall,
  api: ApiSurface,
): Promise<boolean> {
  const rolloutId = call.attribution.rolloutId;
  if (rolloutId === null) return false;
  const rollout = ctx.store.getRollout(rolloutId);
  const spec = branchOf(rollout);
  if (!spec) {
    // A rollout that may be branched later: its calls record the policy's entropy when asked to (entropy.ts).
    askTopLogprobs(call, rollout);
    return false;
  }
  const b = branchingOf(ctx);
  const state = stateOf(ctx, b, rolloutId, spec);
  const position = state.calls++;
  if (spec.divergence?.action === "drop") {
    throw new GatewayError(
      "RLGATE_CONFLICT",
      `branch rollout '${rolloutId}' diverged from its backbone (${spec.divergence.reason}) and was dropped`,
    );
  }
  if (state.sampling) return false;

  const backbone = backboneCalls(ctx, b, spec.of);
  const identity = callIdentity(api, call.body);
  const match = backbone.find((c) => c.identity === identity && !state.replayed.has(c.seq) && c.seq <= spec.call_seq);
  if (match?.seq === spec.call_seq) {
    // The decision point: sampled anew, with the branch's seed unless the harness chose one.
    state.sampling = true;
    markDecision(call.req, spec.seed, tokenCutOf(ctx, rolloutId, spec));
    return false;
  }
  const from = match ? ctx.store.getCall(spec.of, match.seq) : undefined;
  const why = from
    ? unreplayable(api, from.stream, from.response)
    : firstDifference(
        api,
        call.body,
        plain(ctx.store.getCall(spec.of, backbone[position]?.seq ?? -1)?.requestReceived),
      );
  if (!from || why !== null) {
    const divergence: Divergence = {
      at: position,
      reason: why ?? "no backbone call matches",
      action: spec.on_divergence,
    };
    state.sampling = true;
    await recordDivergence(ctx, rolloutId, divergence);
    if (divergence.action === "drop") {
      throw new GatewayError(
        "RLGATE_CONFLICT",
        `branch rollout '${rolloutId}' diverged from its backbone before its decision point (${divergence.reason}): dropped`,
      );
    }
    return false;
  }

  const record = replayRecord(ctx, call, api, from, state);
  state.replayed.set(from.seq, record.seq);
  ctx.metrics.recordCall(record);
  await ctx.store.putCall(record);
  ctx.repair?.observe(record);
  const answer = replayBody(api, from.stream, from.response as Record<string, unknown>, call.body);
  sendReplay(call.res, answer, { "x-rlgate-call": String(record.seq), "x-rlgate-replay-of": String(from.seq) });
  return true;
}
