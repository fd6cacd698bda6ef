// POST /v1/completions as vLLM >= 0.10.2 answers it: prompts as text or token ids (one or a batch), choice-level
// prompt_token_ids / token_ids when return_token_ids is set, OpenAI completions logprobs.
import { viewFromPromptText } from "../conversation.ts";
import type { HandlerInput, SimContext } from "../flavor.ts";
import { generate, type Generation } from "../generate.ts";
import {
  contextHash,
  promptLogprobs,
  sampledLogprobs,
  type PromptTokenLogprob,
  type TokenLogprob,
} from "../logprobs.ts";
import { vllmRoutedExperts } from "../moe.ts";
import { decideTurn } from "../policy.ts";
import { continueTurn, partialTurn } from "../partial-turn.ts";
import { encodeCached } from "../prompt.ts";
import { badRequest, withPrompts, type Reply } from "../reply.ts";
import type { ModelChatFormat } from "../../tokenizer/model-format.ts";
import { toolSyntax } from "../../tokenizer/output-parser.ts";
import { simFormat, simThinks, simVocabSize } from "../sim-format.ts";
import {
  checkLogprobCount,
  checkModel,
  completionLogprobs,
  MAX_LOGPROBS,
  promptLogprobsJson,
  pyLength,
  randomId,
  requestSeed,
  resolveMaxTokens,
  validateIds,
} from "./common.ts";
import { completionRequest, parseBody, stopList, type CompletionRequest } from "./requests.ts";

export interface Choice {
  promptIds: number[];
  gen: Generation;
  logprobs: TokenLogprob[] | null;
  /** vLLM's `prompt_logprobs` of the choice's prompt, when asked for. */
  promptLogprobs: Array<PromptTokenLogprob | null> | null;
  /** The served chat format (its tokenizer names the tokens in logprobs). */
  format: ModelChatFormat;
}

function prompts(
  prompt: CompletionRequest["prompt"],
  format: ModelChatFormat,
  vocabSize: number,
): { text: string; ids: number[] }[] {
  const list: (string | number[])[] =
    typeof prompt === "string"
      ? [prompt]
      : prompt.length > 0 && typeof prompt[0] === "number"
        ? [prompt as number[]]
        : (prompt as (string | number[])[]);
  if (list.length === 0) throw badRequest("Either prompt or prompt_embeds must be provided and non-empty.");
  return list.map((p) => {
    if (typeof p === "string") return { text: p, ids: encodeCached(p, format) };
    validateIds(p, vocabSize);
    return { text: format.decode(p), ids: p };
  });
}

/** Checks a parsed completions request as vLLM does and generates n choices per prompt. */
export function planCompletions(req: CompletionRequest, ctx: SimContext): Choice[] {
  if (req.echo) throw badRequest("rlgate sim does not support echo on /v1/completions");
  if (req.stream_options && !req.stream) throw badRequest("Stream options can only be defined when `stream=True`.");
  if (req.logprobs != null) checkLogprobCount(req.logprobs);
  if (req.prompt_logprobs != null) {
    if (req.stream) throw badRequest("`prompt_logprobs` are not available when `stream=True`.");
    if (req.prompt_logprobs > MAX_LOGPROBS) {
      throw badRequest(
        `Requested prompt logprobs of ${req.prompt_logprobs}, which is greater than max allowed: ${MAX_LOGPROBS}`,
      );
    }
  }
  const seed = requestSeed(ctx, req.seed);
  const n = req.n ?? 1;
  // A completion's text is written in the served syntax; no request tools here, the text is not parsed.
  const syntax = toolSyntax(ctx.toolParser ?? "hermes");
  const format = simFormat(ctx);
  const choices: Choice[] = [];
  for (const prompt of prompts(req.prompt, format, simVocabSize(ctx))) {
    if (prompt.ids.length === 0) throw badRequest("The decoder prompt cannot be empty");
    const maxTokens = resolveMaxTokens(req.max_tokens, prompt.ids.length, ctx);
    // A prompt ending inside an assistant turn is that turn continued (sim/partial-turn.ts).
    const partial = partialTurn(prompt.text, format.family.markup);
    const view = viewFromPromptText(partial?.head ?? prompt.text, format.family.markup);
    if (!simThinks(ctx)) view.thinking = false;
    const promptHash = req.logprobs != null ? contextHash(prompt.ids) : 0;
    const settings = { seed: ctx.logprobSeed ?? ctx.seed, noise: ctx.logprobNoise };
    // Teacher forcing (`rlgate replay score`): every prompt token scored given the tokens before it.
    const scoredPrompt = req.prompt_logprobs != null ? promptLogprobs(settings, prompt.ids, req.prompt_logprobs) : null;
    for (let i = 0; i < n; i++) {
      const whole = generate(decideTurn(view, { seed, choice: i, script: ctx.script }), {
        maxTokens: partial ? Number.MAX_SAFE_INTEGER : maxTokens,
        // A rendered chat ends its turn (<|im_end|>); plain text ends with <|endoftext|> (a generation-config stop id).
        stopToken: view.chatShaped ? format.turnEnd.id : format.endOfText,
        stop: stopList(req.stop),
        stopTokenIds: req.stop_token_ids ?? undefined,
        includeStopStrInOutput: req.include_stop_str_in_output ?? false,
        syntax,
        format,
      });
      const gen = partial ? continueTurn(whole, partial.text, maxTokens, (id) => format.tokenString(id)) : whole;
      const logprobs = req.logprobs != null ? sampledLogprobs(settings, promptHash, gen.ids, req.logprobs) : null;
      choices.push({ promptIds: prompt.ids, gen, logprobs, promptLogprobs: scoredPrompt, format });
    }
  }
  return choices;
}

export function completions({ body, ctx }: HandlerInput): Reply {
  const req = parseBody(completionRequest, body);
  checkModel(req.model, ctx);
  const choices = planCompletions(req, ctx);
  const n = req.n ?? 1;
  const head = { id: `cmpl-${randomId()}`, created: Math.floor(Date.now() / 1000), model: ctx.model };
  const reply = req.stream ? streamReply(req, head, choices, n) : jsonReply(req, head, choices, n, ctx);
  return withPrompts(reply, promptsOf(choices, n));
}

/** Each prompt of a completions request once (its n choices share it). */
export function promptsOf(choices: readonly Choice[], n: number): number[][] {
  return choices.filter((_, i) => i % n === 0).map((c) => c.promptIds);
}

interface Head {
  id: string;
  created: number;
  model: string;
}

export function usageOf(choices: Choice[], n: number) {
  let prompt = 0;
  let completion = 0;
  choices.forEach((c, i) => {
    if (i % n === 0) prompt += c.promptIds.length;
    completion += c.gen.ids.length;
  });
  return { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion };
}

function jsonReply(req: CompletionRequest, head: Head, choices: Choice[], n: number, ctx: SimContext): Reply {
  const wantIds = req.return_token_ids === true;
  const body = {
    id: head.id,
    object: "text_completion",
    created: head.created,
    model: head.model,
    choices: choices.map(({ promptIds, gen, logprobs, promptLogprobs: scored, format }, index) => ({
      index,
      text: gen.text,
      logprobs: logprobs ? completionLogprobs(logprobs, req.logprobs ?? 0, 0, format.tokenString) : null,
      finish_reason: gen.finishReason,
      stop_reason: gen.stopReason,
      prompt_logprobs: scored ? promptLogprobsJson(scored, req.prompt_logprobs ?? 0) : null,
      prompt_token_ids: wantIds ? promptIds : null,
      token_ids: wantIds ? gen.ids : null,
      ...(ctx.moe ? { routed_experts: vllmRoutedExperts(ctx.seed, ctx.moe, promptIds, gen.ids) } : {}),
    })),
    service_tier: null,
    system_fingerprint: null,
    usage: { ...usageOf(choices, n), prompt_tokens_details: null },
    kv_transfer_params: null,
  };
  return { kind: "json", status: 200, body, steps: Math.max(...choices.map((c) => c.gen.ids.length)) };
}

/** One token of one choice in a completion stream. */
export interface StreamedToken {
  choice: Choice;
  index: number;
  t: number;
  last: boolean;
  text: string;
  /** Characters (Python code points) of the choice's text before this token: the logprobs' text offset. */
  offset: number;
}

/** A completion stream's engine steps: one chunk (written by `chunk`) per choice that still has a token at step t. */
export function completionSteps(choices: Choice[], chunk: (token: StreamedToken) => string): string[][] {
  const steps: string[][] = [];
  const textSoFar = choices.map(() => 0);
  const longest = Math.max(...choices.map((c) => c.gen.ids.length));
  for (let t = 0; t < longest; t++) {
    const step: string[] = [];
    choices.forEach((choice, index) => {
      const { gen } = choice;
      if (t >= gen.ids.length) return;
      const text = gen.pieces[t]!;
      step.push(chunk({ choice, index, t, last: t === gen.ids.length - 1, text, offset: textSoFar[index]! }));
      textSoFar[index]! += pyLength(text);
    });
    steps.push(step);
  }
  return steps;
}

// Completion chunks are written with every field (exclude_unset=False): nulls included, one chunk per token.
function streamReply(req: CompletionRequest, head: Head, choices: Choice[], n: number): Reply {
  const wantIds = req.return_token_ids === true;
  const includeUsage = req.stream_options?.include_usage === true;
  const continuous = includeUsage && req.stream_options?.continuous_usage_stats === true;
  const base = { id: head.id, object: "text_completion", created: head.created, model: head.model };
  const steps = completionSteps(
    choices,
    ({ choice: { promptIds, gen, logprobs, format }, index, t, last, text, offset }) => {
      const choice = {
        index,
        text,
        logprobs: logprobs ? completionLogprobs([logprobs[t]!], req.logprobs ?? 0, offset, format.tokenString) : null,
        finish_reason: last ? gen.finishReason : null,
        stop_reason: last ? gen.stopReason : null,
        prompt_token_ids: wantIds && t === 0 ? promptIds : null,
        token_ids: wantIds ? [gen.ids[t]!] : null,
      };
      const usage = continuous
        ? { prompt_tokens: promptIds.length, total_tokens: promptIds.length + t + 1, completion_tokens: t + 1 }
        : null;
      return JSON.stringify({ ...base, choices: [choice], usage });
    },
  );
  const tail = includeUsage ? [JSON.stringify({ ...base, choices: [], usage: usageOf(choices, n) })] : [];
  return { kind: "stream", steps, tail };
}
