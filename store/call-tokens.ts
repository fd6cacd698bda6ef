// The tokens of one captured call as reconstruction reads them: the store decodes them straight from stored bytes
// (see call-tokens-decoder.ts), so their shape belongs to the layer of the records they come from.
import type { Routing } from "../util/routed-experts.ts";
import type { CallRecord, CallStatus, SamplingParams, TokenSource } from "./records.ts";

/** Token ids as they arrive: a plain array from JSON or a typed array from the store. */
export type TokenIds = ArrayLike<number>;

export interface ChoiceTokens {
  index: number;
  /** Sampled ids (including the stop token when the upstream reports it); null when the upstream gave none. */
  tokenIds: TokenIds | null;
  /** Logprob of each sampled id; null (or a length mismatch) means unknown. */
  logprobs: ArrayLike<number> | null;
  finishReason: string | null;
  /** Routed experts of positions `routing.start` on of this choice's sequence (absent: none). */
  routing?: Routing | null;
}

/** The minimal view of one captured call that reconstruction needs. Build it with `fromCallRecord`. */
export interface CallTokens {
  callSeq: number;
  promptIds: TokenIds | null;
  choices: readonly ChoiceTokens[];
  tokenSource: TokenSource;
  /** Why the ids are not trusted, as the gateway judged it (shown in the flags). */
  tokenIssue?: string | null;
  status: CallStatus;
  startedAt: number;
  /** Tools the request offered (what tells a side call from an agent's); null or absent when unknown. */
  tools?: number | null;
  /** Which policy sampled the call and how (for trainers; reconstruction passes them through). */
  policyVersion?: string | null;
  /** The version of each sampled token as runs, when a weight update fell inside the answer (gateway/policy). */
  policyVersions?: Array<{ start: number; version: string | null }> | null;
  sampling?: SamplingParams | null;
  /** Why the call's routed experts were not kept (serve --routed-experts); absent or null: nothing wrong. */
  routingIssue?: string | null;
}

/**
 * Where a new prompt's tokens were already stored: the earlier call whose sequence (prompt ++ sampled ids of `choice`)
 * starts with this prompt's first `length` ids.
 */
export interface PromptRef {
  seq: number;
  choice: number;
  length: number;
}

/**
 * Finds, per open rollout, the longest stored prefix of each new prompt, so a prompt is stored as a reference plus its
 * new tokens. The store is given one (trajectory/prompt-index.ts builds it on the rollout's prefix tree); without one,
 * prompts are stored whole.
 */
/**
 * What a per-rollout cache has seen of the calls stored for its rollout: their seqs, and how far it has read the
 * rollout's commit log (written by the workers of a shared store; see Store.unseenCalls).
 */
export interface SeenCalls {
  readonly seqs: Set<number>;
  mark: number;
}

export interface PromptRefIndex {
  has(rolloutId: string): boolean;
  /** What a rollout's index holds of its stored calls (undefined: none held), for catching up (Store.unseenCalls). */
  seen(rolloutId: string): SeenCalls | undefined;
  /** Adds calls other processes stored since the index was filled (a shared store), in commit order. */
  extend(rolloutId: string, calls: readonly CallTokens[]): void;
  /** Installs an index rebuilt from a rollout's stored calls (after a restart or an eviction), given in call order. */
  rebuild(rolloutId: string, calls: readonly CallTokens[], mark: number): void;
  /** The storage reference for a call's prompt; the call is added to its rollout's index. */
  admit(rolloutId: string, call: CallRecord): PromptRef | null;
  forget(rolloutId: string): void;
  /**
   * How many leading positions of `ids` already have routed experts in the rollout's tree (0 when the index does not
   * hold the rollout): what an upstream need not send again (SGLang's routed_experts_start_len).
   */
  routedPrefix(rolloutId: string, ids: ArrayLike<number>): number;
}
