// The records rlgate keeps. These shapes are the contract between the gateway (writer), trajectory reconstruction
// and the control API (readers). Token arrays are plain number arrays here; the store packs them as int32/float32.
import type { Routing } from "../util/routed-experts.ts";

/** The value of JSON bytes (UTF-8). */
export function jsonFromBytes(bytes: Uint8Array): unknown {
  return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8"));
}

/** `base` with `insert` placed at byte `at`. */
export function spliceBytes(base: Uint8Array, at: number, insert: Uint8Array): Buffer {
  return Buffer.concat([base.subarray(0, at), insert, base.subarray(at)]);
}

/**
 * A JSON body kept as the bytes that travelled, so the hot path never re-encodes a request or response it already
 * holds as bytes. It serializes (JSON.stringify, the store) as the value itself.
 */
export class RawJson {
  readonly #bytes: Uint8Array;
  constructor(bytes: Uint8Array | string) {
    this.#bytes = typeof bytes === "string" ? Buffer.from(bytes) : bytes;
  }
  get bytes(): Uint8Array {
    return this.#bytes;
  }
  value(): unknown {
    return jsonFromBytes(this.bytes);
  }
  toJSON(): unknown {
    return this.value();
  }
}

/**
 * A body that is another one's bytes with `insert` placed at byte `at`: how a request usually goes upstream (the
 * harness's body plus the fields rlgate adds). Stored as that difference, so a long conversation is stored once.
 */
export class SplicedJson {
  readonly base: RawJson;
  readonly at: number;
  readonly insert: Uint8Array;
  constructor(base: RawJson, at: number, insert: Uint8Array) {
    this.base = base;
    this.at = at;
    this.insert = insert;
  }
  get bytes(): Buffer {
    return spliceBytes(this.base.bytes, this.at, this.insert);
  }
  value(): unknown {
    return jsonFromBytes(this.bytes);
  }
  toJSON(): unknown {
    return this.value();
  }
}

/** How a call ended, from the harness's point of view (`rejected`: refused by the gateway, never sent upstream). */
export type CallStatus = "ok" | "upstream_error" | "client_aborted" | "timeout" | "rejected";

/** Where a call's token ids came from. Only `upstream` calls are trained on; the others are flagged. */
export type TokenSource = "upstream" | "retokenized" | "missing";

/** A rollout is `open` until the harness's driver finishes it with one of the other statuses. */
export type RolloutStatus = "open" | "ok" | "infra_error" | "timeout" | "aborted";

/** The harness-facing API a call arrived on. */
export type ApiSurface = "chat.completions" | "completions" | "responses" | "messages" | "gemini";

export interface ChoiceCapture {
  index: number;
  /** Sampled token ids, including the stop token when the upstream reports it (vLLM does for EOS). */
  tokenIds: number[];
  /** Logprob of each sampled token, aligned with `tokenIds`; null when the upstream sent none. */
  logprobs: number[] | null;
  /**
   * The policy's entropy at each sampled token, from the top logprobs a rollout asked for (`metadata.entropy_top_k`,
   * gateway/branching/entropy.ts), aligned with `tokenIds`; absent when none were asked for or sent.
   */
  entropies?: number[];
  finishReason: string | null;
  /**
   * MoE routing replay (`serve --routed-experts`): the experts of this choice's sequence (prompt ++ sampled ids)
   * from position `routing.start` on, kept narrowed (uint8/uint16). Only the positions the rollout had no routing for
   * yet are kept (the store trims the rest), so routing is stored once per unique token. Absent: none captured.
   */
  routing?: Routing;
}

export interface CallTimings {
  /** Epoch milliseconds when rlgate received the request head. */
  start: number;
  /** Epoch ms when the request was sent upstream. */
  upstreamStart: number | null;
  /** Epoch ms of the first response byte from the upstream. */
  firstByte: number | null;
  /** Epoch ms of the first sampled token (first SSE event carrying tokens or content). */
  firstToken: number | null;
  /** Epoch ms when the upstream response ended (or failed). */
  end: number;
  /** Milliseconds spent in rlgate itself (parsing, rewriting, capture), excluding waiting on the upstream. */
  overheadMs: number;
}

/**
 * How a call's prompt was made. `messages`: the harness's messages went upstream as chat; `tokens`: rlgate rendered
 * the prompt and sent ids (see docs/prompt-modes.md). Absent on calls of a gateway in messages mode.
 */
export interface PromptRecord {
  mode: "tokens" | "messages";
  /** A messages-mode call in a tokens-mode gateway: why it could not be served from tokens. */
  fallbackReason?: string;
  /** tokens: the thread (the seq of its first call). */
  thread?: number;
  /** tokens: the call and choice whose prompt and sampled ids this prompt starts with; null for a new thread. */
  parent?: { seq: number; choice: number } | null;
  /** tokens, new thread: why it did not continue an earlier call. */
  newThread?: string;
  /** tokens: per choice, the key of "these messages + this answer" that a later call continuing it matches. */
  continuation?: string[];
  /**
   * tokens: the last message is context a harness may move (not the model's, not a tool result): its ids' [start, end)
   * in the prompt, and per choice the key of "the messages without it + this answer" (gateway/prompts/moved-context.ts).
   */
  trailingContext?: { start: number; end: number; continuation: string[] };
  /** tokens: the prompt continues its parent without the parent's trailing context message, which the harness moved. */
  movedContext?: boolean;
}

/** Sampling parameters of a forwarded request (absent: the server's default). */
export interface SamplingParams {
  temperature?: number;
  topP?: number;
  topK?: number;
}

export interface CallRecord {
  /** Global, monotonically increasing call number (also the call's id). */
  seq: number;
  rolloutId: string | null;
  api: ApiSurface;
  /** Request path as the harness sent it (including any /r/{id} prefix). */
  path: string;
  stream: boolean;
  model: string | null;
  status: CallStatus;
  /** Upstream HTTP status; null when no response head arrived. */
  httpStatus: number | null;
  error: string | null;
  /** Body as the harness sent it. */
  requestReceived: unknown;
  /** Body as rlgate sent it upstream (with token-id and logprob fields added). */
  requestForwarded: unknown;
  /** Response as delivered to the harness; a stream is assembled into one chat.completion-shaped object. */
  response: unknown;
  /**
   * For calls translated to chat completions (Messages, Responses): the upstream's chat response (a stream assembled
   * into one chat.completion), so a reader sees what the harness sent, what the model saw and said, and what the
   * harness got. Absent for calls the upstream answered in the harness's own API.
   */
  upstreamResponse?: unknown;
  promptTokenIds: number[] | null;
  choices: ChoiceCapture[];
  /** What the translation to the upstream's API dropped or changed (hosted tools, unsupported blocks), when anything. */
  warnings?: string[];
  /** When `serve --max-tokens-cap` lowered the harness's max_tokens: what it asked for and what was sent. */
  maxTokensCap?: { requested: number; sent: number; contextLength: number | null; promptTokens: number | null };
  tokenSource: TokenSource;
  /** Why the token ids are not trustworthy (null when they are): e.g. fewer ids than the upstream's usage counts. */
  tokenIssue: string | null;
  /**
   * With `serve --routed-experts`: why the upstream's routed experts could not be kept (absent, malformed, a shape
   * that does not match the tokens); absent when they were, or when routing was not asked for. Flags the rollout.
   */
  routingIssue?: string;
  timings: CallTimings;
  /** Tools the forwarded chat request offered (absent on records that predate it, and on completions). */
  tools?: number;
  /** Earlier assistant turns rlgate put back as the model produced them before forwarding (history repair). */
  repairs?: HistoryRepair[];
  /** How the prompt was made, with --prompts tokens (docs/prompt-modes.md). */
  prompt?: PromptRecord;
  /**
   * The policy version that served the call: the call's `x-rlgate-policy-version` header, else its rollout's
   * `policy_version`; null when neither was given (absent in calls recorded before it existed).
   */
  policyVersion?: string | null;
  /** Sampling parameters of the forwarded request (temperature, top_p, top_k). */
  sampling?: SamplingParams | null;
  /**
   * The upstream replica (its URL as configured) that served the call, or the last one tried when it failed; absent
   * when the call never went upstream, and in calls recorded before it existed.
   */
  replica?: string;
  /**
   * A branch rollout's call answered with its backbone's recorded answer (gateway/branching): the backbone call it
   * replayed. Its prompt ids then hold that call's prompt and answer (context here), its choices no sampled ids.
   */
  replayOf?: { rolloutId: string; seq: number };
  /** Weight updates the call met (gateway/policy); absent when none did. */
  policyUpdate?: PolicyUpdateRecord;
}

/** What a weight update did to one call: held it before it went upstream, or interrupted its answer. */
export interface PolicyUpdateRecord {
  /** Milliseconds the call waited for a resume before it went upstream (a pause held it). */
  heldMs?: number;
  /** Times the upstream aborted the answer and the gateway continued it (gateway/policy/continued-completion.ts). */
  continued?: number;
  /**
   * The version of each sampled token, as runs over the (single) choice's tokens: tokens from `start` to the next run's
   * start were sampled by `version`. Absent when every token has the call's `policyVersion`.
   */
  versions?: { start: number; version: string | null }[];
}

/** One assistant turn of a forwarded chat request that history repair changed. */
export interface HistoryRepair {
  /** Index of the message in the forwarded chat `messages`. */
  turn: number;
  /**
   * What was put back: `content` (whitespace-only content before a tool call, the text's trailing newline before a
   * tool call, or content the harness changed), `reasoning` (reasoning the harness dropped or changed), `empty_think`
   * (the empty think block of a turn sampled with thinking off), `tool_calls` (tool-call arguments it re-wrote).
   */
  kind: "content" | "reasoning" | "empty_think" | "tool_calls";
  /** The call that sampled the turn. */
  callSeq: number;
}

export interface RolloutRecord {
  id: string;
  /** Secret used as a bearer token / x-api-key that reaches only this rollout. */
  key: string;
  group: string | null;
  task: string | null;
  harness: string | null;
  metadata: Record<string, unknown>;
  /** The policy version the rollout's calls are served by, unless a call's header says otherwise. */
  policyVersion?: string | null;
  /**
   * The training round the rollout belongs to, as its creator declared it (a positive integer; e.g. the training
   * step): with `group` it names the RL group. Null or absent (records written before it existed): none given.
   */
  round?: number | null;
  /**
   * Epoch ms after which the gateway finishes the rollout, still open, as `timeout` without a reward (its `deadline_s`,
   * else `serve --rollout-timeout`). Null or absent: no deadline.
   */
  deadlineAt?: number | null;
  status: RolloutStatus;
  reward: number | null;
  createdAt: number;
  finishedAt: number | null;
}
