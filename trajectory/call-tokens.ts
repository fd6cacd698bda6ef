// From a captured call to the tokens reconstruction uses, and what is wrong with them. Only calls that ended ok and
// carry token ids enter the tree; ids rlgate retokenized enter as untrusted (never trained); the rest are flagged.
import type { CallRecord, CallStatus, SamplingParams, TokenSource } from "../store/records.ts";
import type { CallShape } from "./segments.ts";
import type { CallTokens, TokenIds } from "./types.ts";

export function fromCallRecord(record: CallRecord): CallTokens {
  return {
    callSeq: record.seq,
    promptIds: record.promptTokenIds,
    choices: record.choices.map((choice) => ({
      index: choice.index,
      tokenIds: choice.tokenIds,
      logprobs: choice.logprobs,
      finishReason: choice.finishReason,
      ...(choice.routing ? { routing: choice.routing } : {}),
    })),
    tokenSource: record.tokenSource,
    tokenIssue: record.tokenIssue ?? null,
    status: record.status,
    startedAt: record.timings.start,
    tools: record.tools ?? null,
    policyVersion: record.policyVersion ?? null,
    policyVersions: record.policyUpdate?.versions ?? null,
    sampling: record.sampling ?? null,
    routingIssue: record.routingIssue ?? null,
  };
}

export interface PreparedChoice {
  index: number;
  tokenIds: TokenIds;
  /** Null when the upstream sent none or they do not align with the ids. */
  logprobs: ArrayLike<number> | null;
}

export interface PreparedCall {
  call: CallTokens;
  /** Whether the call's tokens enter the tree. */
  usable: boolean;
  trusted: boolean;
  prompt: TokenIds;
  /** Choices with ids, by index; a choice whose prompt and completion are both empty is left out. */
  choices: PreparedChoice[];
  failed: boolean;
  missingTokenIds: boolean;
  retokenized: boolean;
  missingLogprobs: boolean;
}

/** What reconstruction keeps of a call once its tokens are in the tree (no token arrays). */
export interface CallNote {
  callSeq: number;
  status: CallStatus;
  tokenSource: TokenSource;
  tokenIssue: string | null;
  choices: Array<{ index: number; sampledTokens: number; finishReason: string | null }>;
  policyVersion: string | null;
  /** Per-token versions as runs when a weight update fell inside the answer; null: all `policyVersion`. */
  policyVersions: Array<{ start: number; version: string | null }> | null;
  sampling: SamplingParams | null;
  failed: boolean;
  missingTokenIds: boolean;
  retokenized: boolean;
  missingLogprobs: boolean;
  /** Why the gateway could not keep the call's routed experts (null: nothing wrong, or none asked for). */
  routingIssue: string | null;
}

export function noteCall(p: PreparedCall): CallNote {
  return {
    callSeq: p.call.callSeq,
    status: p.call.status,
    tokenSource: p.call.tokenSource,
    tokenIssue: p.call.tokenIssue ?? null,
    choices: [...p.call.choices]
      .sort((a, b) => a.index - b.index)
      .map((c) => ({ index: c.index, sampledTokens: c.tokenIds?.length ?? 0, finishReason: c.finishReason ?? null })),
    policyVersion: p.call.policyVersion ?? null,
    policyVersions: p.call.policyVersions ?? null,
    sampling: p.call.sampling ?? null,
    failed: p.failed,
    missingTokenIds: p.missingTokenIds,
    retokenized: p.retokenized,
    missingLogprobs: p.missingLogprobs,
    routingIssue: p.call.routingIssue ?? null,
  };
}

const EMPTY: TokenIds = [];

/** What segments read of a call: the tools it offered and its longest answer. */
export function callShape(p: PreparedCall): CallShape {
  let sampledTokens = 0;
  for (const choice of p.choices) sampledTokens = Math.max(sampledTokens, choice.tokenIds.length);
  return { tools: p.call.tools ?? null, sampledTokens };
}

export function prepareCall(call: CallTokens): PreparedCall {
  const failed = call.status !== "ok";
  const trusted = call.tokenSource === "upstream";
  const prompt = call.promptIds ?? EMPTY;
  const choices: PreparedChoice[] = [];
  let choiceIdsMissing = call.choices.length === 0;
  let missingLogprobs = false;
  for (const choice of [...call.choices].sort((a, b) => a.index - b.index)) {
    if (choice.tokenIds === null) {
      choiceIdsMissing = true;
      continue;
    }
    const aligned = choice.logprobs !== null && choice.logprobs.length === choice.tokenIds.length;
    if (trusted && !aligned && choice.tokenIds.length > 0) missingLogprobs = true;
    if (prompt.length + choice.tokenIds.length === 0) continue;
    choices.push({ index: choice.index, tokenIds: choice.tokenIds, logprobs: aligned ? choice.logprobs : null });
  }
  const missingTokenIds = !failed && (call.tokenSource === "missing" || call.promptIds === null || choiceIdsMissing);
  const usable = !failed && call.tokenSource !== "missing" && call.promptIds !== null && choices.length > 0;
  return {
    call,
    usable,
    trusted,
    prompt,
    choices: usable ? choices : [],
    failed,
    missingTokenIds,
    retokenized: !failed && call.tokenSource === "retokenized",
    missingLogprobs: usable && missingLogprobs,
  };
}
