// POST /v1/chat/completions as vLLM >= 0.10.2 answers it (reasoning under `reasoning`, as >= 0.17 writes it, or
// `reasoning_content`: SimContext.reasoningField), served with the qwen3 reasoning parser and the hermes
// tool parser (`--reasoning-parser qwen3 --enable-auto-tool-choice --tool-call-parser hermes`).
import type { ChatMessage } from "../../tokenizer/chat-template.ts";
import { viewFromChat } from "../conversation.ts";
import type { HandlerInput, SimContext } from "../flavor.ts";
import { generate, type Generation } from "../generate.ts";
import { contextHash, sampledLogprobs, type TokenLogprob } from "../logprobs.ts";
import {
  answerDeltas,
  chatDeltaJson,
  chatMessageJson,
  parseAnswer,
  toolSyntax,
  type TokenDelta,
  type ToolSyntax,
} from "../../tokenizer/output-parser.ts";
import { vllmRoutedExperts } from "../moe.ts";
import { decideTurn } from "../policy.ts";
import { chatPrompt } from "../prompt.ts";
import { badRequest, withPrompts, type Reply } from "../reply.ts";
import type { ModelChatFormat } from "../../tokenizer/model-format.ts";
import { templateReasoning, type ReasoningField } from "../../tokenizer/reasoning-field.ts";
import { simFormat, simThinks } from "../sim-format.ts";
import { chatLogprobEntry, checkLogprobCount, checkModel, randomId, requestSeed, resolveMaxTokens } from "./common.ts";
import { chatRequest, parseBody, stopList, type ChatRequest } from "./requests.ts";

export interface Choice {
  gen: Generation;
  logprobs: TokenLogprob[] | null;
}

/** What one chat request generates, before any server writes it in its own response shape. */
export interface ChatPlan {
  req: ChatRequest;
  promptIds: number[];
  choices: Choice[];
  /** Whether tool calls are parsed out of the text (tools given and tool_choice is not "none"). */
  toolParsing: boolean;
  /** The served tool parser (`--tool-call-parser`) for this request's tools. */
  syntax: ToolSyntax;
  /** The served chat format (tokenizer, markup). */
  format: ModelChatFormat;
  topK: number;
}

/** Checks a parsed chat request as vLLM does, renders its prompt and generates every choice. */
export function planChat(req: ChatRequest, ctx: SimContext): ChatPlan {
  if (req.stream_options && !req.stream) throw badRequest("Stream options can only be defined when `stream=True`.");
  const topK = req.top_logprobs ?? 0;
  if (topK > 0 && !req.logprobs) throw badRequest("when using `top_logprobs`, `logprobs` must be set to true.");
  checkLogprobCount(topK);
  const tools = req.tools?.length ? req.tools : undefined;
  if (req.tool_choice != null && req.tool_choice !== "none" && req.tool_choice !== "auto" && !tools) {
    throw badRequest("When using `tool_choice`, `tools` must be set.");
  }
  const thinkingArg = req.chat_template_kwargs?.["enable_thinking"];
  const enableThinking = typeof thinkingArg === "boolean" ? thinkingArg : undefined;
  const messages = req.messages as unknown as ChatMessage[];
  const format = simFormat(ctx);
  const field = ctx.reasoningField ?? "reasoning";

  let promptIds: number[];
  try {
    const reasoningEffort = typeof req.reasoning_effort === "string" ? req.reasoning_effort : null;
    promptIds = chatPrompt({
      messages: templateReasoning(messages, field),
      tools,
      enableThinking,
      template: ctx.chatTemplate,
      format,
      reasoningEffort,
    }).ids;
  } catch (cause) {
    // The chat template raises on histories it cannot render; vLLM reports those as 400.
    throw badRequest((cause as Error).message, cause);
  }
  const maxTokens = resolveMaxTokens(req.max_completion_tokens ?? req.max_tokens, promptIds.length, ctx);
  const view = viewFromChat(messages, tools, req.tool_choice, simThinks(ctx) ? enableThinking : false);
  const syntax = toolSyntax(ctx.toolParser ?? "hermes", tools);
  const seed = requestSeed(ctx, req.seed);
  const promptHash = req.logprobs ? contextHash(promptIds) : 0;
  const choices: Choice[] = [];
  for (let i = 0; i < (req.n ?? 1); i++) {
    const gen = generate(decideTurn(view, { seed, choice: i, script: ctx.script }), {
      maxTokens,
      stopToken: format.turnEnd.id,
      stop: stopList(req.stop),
      stopTokenIds: req.stop_token_ids ?? undefined,
      includeStopStrInOutput: req.include_stop_str_in_output ?? false,
      syntax,
      format,
    });
    const logprobs = req.logprobs
      ? sampledLogprobs({ seed: ctx.logprobSeed ?? ctx.seed, noise: ctx.logprobNoise }, promptHash, gen.ids, topK)
      : null;
    choices.push({ gen, logprobs });
  }
  return {
    req,
    promptIds,
    choices,
    toolParsing: tools !== undefined && req.tool_choice !== "none",
    syntax,
    format,
    topK,
  };
}

export function chatCompletions({ body, ctx }: HandlerInput): Reply {
  const req = parseBody(chatRequest, body);
  checkModel(req.model, ctx);
  const { promptIds, choices, toolParsing, syntax, format, topK } = planChat(req, ctx);
  const head = { id: `chatcmpl-${randomId()}`, created: Math.floor(Date.now() / 1000), model: ctx.model };
  const parsing = toolParsing ? syntax : null;
  const reply = req.stream
    ? streamReply(req, head, promptIds, choices, parsing, topK, format, ctx)
    : jsonReply(req, head, promptIds, choices, parsing, topK, ctx, format);
  return withPrompts(reply, [promptIds]);
}

interface Head {
  id: string;
  created: number;
  model: string;
}

function jsonReply(
  req: ChatRequest,
  head: Head,
  promptIds: number[],
  choices: Choice[],
  toolParsing: ToolSyntax | null,
  topK: number,
  ctx: SimContext,
  format: ModelChatFormat,
): Reply {
  const wantIds = req.return_token_ids === true;
  const field = ctx.reasoningField ?? "reasoning";
  let completionTokens = 0;
  const out = choices.map(({ gen, logprobs }, index) => {
    completionTokens += gen.ids.length;
    const parsed = parseAnswer(format, gen.ids, gen.text, toolParsing !== null, toolParsing ?? toolSyntax("hermes"));
    return {
      index,
      message: chatMessageJson(parsed, () => `chatcmpl-tool-${randomId()}`, req.include_reasoning !== false, field),
      logprobs: logprobs ? { content: logprobs.map((lp) => chatLogprobEntry(lp, topK, format.tokenString)) } : null,
      finish_reason: parsed.toolCalls.length > 0 ? "tool_calls" : gen.finishReason,
      stop_reason: gen.stopReason,
      token_ids: wantIds ? gen.ids : null,
      // --enable-return-routed-experts: every non-streamed choice carries them (streams do not).
      ...(ctx.moe ? { routed_experts: vllmRoutedExperts(ctx.seed, ctx.moe, promptIds, gen.ids) } : {}),
    };
  });
  const body = {
    id: head.id,
    object: "chat.completion",
    created: head.created,
    model: head.model,
    choices: out,
    service_tier: null,
    system_fingerprint: null,
    usage: {
      prompt_tokens: promptIds.length,
      total_tokens: promptIds.length + completionTokens,
      completion_tokens: completionTokens,
      prompt_tokens_details: null,
    },
    prompt_logprobs: null,
    prompt_token_ids: wantIds ? promptIds : null,
    kv_transfer_params: null,
  };
  return { kind: "json", status: 200, body, steps: Math.max(...choices.map((c) => c.gen.ids.length)) };
}

function deltaJson(delta: TokenDelta, callIds: string[], field: ReasoningField): Record<string, unknown> {
  return chatDeltaJson(delta, callIds, () => `chatcmpl-tool-${randomId()}`, field);
}

// vLLM writes chunks with exclude_unset: fields it sets explicitly appear even when null (token_ids, logprobs,
// prompt_token_ids on the first chunk), fields it never sets are absent.
function streamReply(
  req: ChatRequest,
  head: Head,
  promptIds: number[],
  choices: Choice[],
  toolParsing: ToolSyntax | null,
  topK: number,
  format: ModelChatFormat,
  ctx: SimContext,
): Reply {
  const wantIds = req.return_token_ids === true;
  const field = ctx.reasoningField ?? "reasoning";
  const includeUsage = req.stream_options?.include_usage === true;
  const continuous = includeUsage && req.stream_options?.continuous_usage_stats === true;
  const promptTokens = promptIds.length;
  const base = { id: head.id, object: "chat.completion.chunk", created: head.created, model: head.model };
  const usage = (completion: number) => ({
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completion,
    completion_tokens: completion,
  });

  const steps: string[][] = [[]];
  for (let i = 0; i < choices.length; i++) {
    const chunk: Record<string, unknown> = {
      ...base,
      choices: [{ index: i, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }],
    };
    if (continuous) chunk["usage"] = usage(0);
    chunk["prompt_token_ids"] = wantIds ? promptIds : null;
    steps[0]!.push(JSON.stringify(chunk));
  }

  const plans = choices.map(({ gen }) => ({
    deltas: answerDeltas(format, gen, toolParsing !== null),
    callIds: [] as string[],
    toolsStreamed: false,
  }));
  const longest = Math.max(...choices.map((c) => c.gen.ids.length));
  for (let t = 0; t < longest; t++) {
    const step = (steps[t] ??= []);
    choices.forEach(({ gen, logprobs }, i) => {
      if (t >= gen.ids.length) return;
      const plan = plans[i]!;
      let delta = plan.deltas[t] ?? null;
      if (delta?.reasoning_content !== undefined && req.include_reasoning === false) delta = null;
      const last = t === gen.ids.length - 1;
      if (delta?.toolCalls) plan.toolsStreamed = true;
      // A token that adds no text is still sent when its id or logprob was asked for, so the chunks cover every token.
      if (!delta && !last && !wantIds && !logprobs) return;
      const deltaBody = delta
        ? deltaJson(delta, plan.callIds, field)
        : last && gen.ids[t] === format.turnEnd.id
          ? { content: "" }
          : {};
      const choice: Record<string, unknown> = {
        index: i,
        delta: deltaBody,
        logprobs: logprobs ? { content: [chatLogprobEntry(logprobs[t]!, topK, format.tokenString)] } : null,
        finish_reason: last ? (plan.toolsStreamed ? "tool_calls" : gen.finishReason) : null,
      };
      if (last) choice["stop_reason"] = gen.stopReason;
      choice["token_ids"] = wantIds ? [gen.ids[t]!] : null;
      const chunk: Record<string, unknown> = { ...base, choices: [choice] };
      if (continuous) chunk["usage"] = usage(t + 1);
      step.push(JSON.stringify(chunk));
    });
  }
  const tail: string[] = [];
  if (includeUsage) {
    const completion = choices.reduce((sum, c) => sum + c.gen.ids.length, 0);
    tail.push(JSON.stringify({ ...base, choices: [], usage: usage(completion) }));
  }
  return { kind: "stream", steps, tail };
}
