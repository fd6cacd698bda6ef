// `rlgate replay resend`: recorded calls sent again to an inference server exactly as rlgate forwarded them, and
// compared: prompt ids (exact — a changed chat template or tokenizer shows at the first differing position), sampled
// ids where the call was greedy or seeded (elsewhere a difference is expected and only reported), and the answer the
// harness would see (content, reasoning, tool calls, finish reason).
import { reasoningOf } from "../tokenizer/reasoning-field.ts";
import type { CallRecord } from "../store/records.ts";
import { tokenInContext, type Decode, type TokenInContext } from "./context.ts";
import { mapLimit, type ReplayUpstream } from "./upstream.ts";

export interface PromptDifference {
  position: number;
  recorded: TokenInContext | null;
  now: TokenInContext | null;
}

export interface ChoiceComparison {
  index: number;
  /** Greedy (temperature 0) or seeded: the same sampled ids are expected. */
  deterministic: boolean;
  sampledSame: boolean;
  /** First position where the sampled ids differ (null when equal). */
  sampledDiffersAt: number | null;
  answerSame: boolean;
  /** Fields of the answer that differ (content, reasoning, tool_calls, finish_reason, text). */
  answerDifferences: string[];
}

export interface CallComparison {
  callSeq: number;
  api: string;
  /** The upstream route the call was sent to again. */
  route: string;
  promptTokens: { recorded: number; now: number | null };
  promptSame: boolean;
  promptDifference: PromptDifference | null;
  choices: ChoiceComparison[];
  /** Whether everything that is expected to be equal is. */
  same: boolean;
  error: string | null;
}

export interface ResendReport {
  upstream: string;
  rolloutId: string;
  calls: CallComparison[];
  /** Calls not sent again (failed when recorded, no forwarded body). */
  skipped: Array<{ callSeq: number; reason: string }>;
}

export interface ResendOptions {
  upstream: ReplayUpstream;
  decode: Decode;
  concurrency: number;
  onProgress?: () => void;
}

type Json = Record<string, any>;

/** The first position where two id lists differ, or null when equal. */
export function firstDifference(a: readonly number[], b: readonly number[]): number | null {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? null : n;
}

function routeOf(body: Json): string {
  return Array.isArray(body["messages"]) ? "/v1/chat/completions" : "/v1/completions";
}

/**
 * The forwarded body, answered in one piece: a recorded stream is re-sent non-streamed (the same generation, one
 * body to compare) with token ids asked for whatever the flavour.
 */
function resendBody(forwarded: Json): Json {
  const { stream_options: _options, ...rest } = forwarded;
  return { ...rest, stream: false, return_token_ids: true };
}

function promptIdsOf(answer: Json): number[] | null {
  const top = answer["prompt_token_ids"];
  if (Array.isArray(top)) return top as number[];
  const choice = answer["choices"]?.[0]?.["prompt_token_ids"];
  return Array.isArray(choice) ? (choice as number[]) : null;
}

/** What the harness sees of one choice (chat: the message's fields; completions: the text), field by field. */
function visible(choice: Json | undefined): Record<string, unknown> {
  if (!choice) return {};
  if (choice["message"]) {
    const m = choice["message"] as Json;
    const toolCalls =
      (m["tool_calls"] as Json[] | undefined)?.map((c) => ({
        name: c["function"]?.["name"],
        arguments: c["function"]?.["arguments"],
      })) ?? [];
    return {
      content: m["content"] ?? null,
      // Under either name: a recording from vLLM <= 0.16 (`reasoning_content`) against a resend to a current one.
      reasoning: reasoningOf(m) ?? null,
      tool_calls: toolCalls,
      finish_reason: choice["finish_reason"] ?? null,
    };
  }
  return { text: choice["text"] ?? null, finish_reason: choice["finish_reason"] ?? null };
}

function answerDifferences(recorded: Json | undefined, now: Json | undefined): string[] {
  const a = visible(recorded);
  const b = visible(now);
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].filter(
    (k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]),
  );
}

/** The upstream's answer as rlgate recorded it: the chat response of a translated call, else the response itself. */
function recordedAnswer(call: CallRecord): Json | undefined {
  return (call.upstreamResponse ?? call.response) as Json | undefined;
}

async function compareCall(call: CallRecord, options: ResendOptions): Promise<CallComparison> {
  const forwarded = call.requestForwarded as Json;
  const route = routeOf(forwarded);
  const base = { callSeq: call.seq, api: call.api, route };
  const recordedPrompt = call.promptTokenIds ?? [];
  let answer: Json;
  try {
    answer = await options.upstream.post(route, resendBody(forwarded));
  } catch (error) {
    const message = (error as Error).message;
    return {
      ...base,
      promptTokens: { recorded: recordedPrompt.length, now: null },
      promptSame: false,
      promptDifference: null,
      choices: [],
      same: false,
      error: message,
    };
  }
  const nowPrompt = promptIdsOf(answer);
  const at = nowPrompt ? firstDifference(recordedPrompt, nowPrompt) : null;
  const promptDifference: PromptDifference | null =
    at === null
      ? null
      : {
          position: at,
          recorded: at < recordedPrompt.length ? tokenInContext(recordedPrompt, at, options.decode) : null,
          now: nowPrompt && at < nowPrompt.length ? tokenInContext(nowPrompt, at, options.decode) : null,
        };
  const deterministic =
    forwarded["temperature"] === 0 || (forwarded["seed"] !== undefined && forwarded["seed"] !== null);
  const recorded = recordedAnswer(call);
  const choices: ChoiceComparison[] = call.choices.map((choice) => {
    const nowChoice = (answer["choices"] as Json[] | undefined)?.find((c) => c["index"] === choice.index);
    const nowIds = (nowChoice?.["token_ids"] as number[] | undefined) ?? [];
    const differsAt = firstDifference(choice.tokenIds, nowIds);
    const recordedChoice = (recorded?.["choices"] as Json[] | undefined)?.find((c) => c["index"] === choice.index);
    const differences = answerDifferences(recordedChoice, nowChoice);
    return {
      index: choice.index,
      deterministic,
      sampledSame: differsAt === null,
      sampledDiffersAt: differsAt,
      answerSame: differences.length === 0,
      answerDifferences: differences,
    };
  });
  const promptSame = nowPrompt !== null && at === null;
  const same = promptSame && choices.every((c) => !c.deterministic || (c.sampledSame && c.answerSame));
  return {
    ...base,
    promptTokens: { recorded: recordedPrompt.length, now: nowPrompt?.length ?? null },
    promptSame,
    promptDifference,
    choices,
    same,
    error:
      nowPrompt === null ? "the upstream returned no prompt_token_ids (vLLM >= 0.10.2 with return_token_ids)" : null,
  };
}

export async function resendCalls(
  rolloutId: string,
  calls: readonly CallRecord[],
  options: ResendOptions,
): Promise<ResendReport> {
  const skipped: ResendReport["skipped"] = [];
  const sendable = calls.filter((call) => {
    if (call.status !== "ok") skipped.push({ callSeq: call.seq, reason: `recorded as ${call.status}` });
    else if (!call.requestForwarded || typeof call.requestForwarded !== "object")
      skipped.push({ callSeq: call.seq, reason: "no forwarded body" });
    else if (!call.promptTokenIds) skipped.push({ callSeq: call.seq, reason: "no recorded prompt ids" });
    else return true;
    return false;
  });
  const compared = await mapLimit(
    sendable,
    options.concurrency,
    (call) => compareCall(call, options),
    options.onProgress,
  );
  return { upstream: options.upstream.url, rolloutId, calls: compared, skipped };
}
