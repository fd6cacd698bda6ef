// Prompt modes, consulted where a chat-shaped call (chat completions, Messages, Responses) goes upstream. In
// `messages` mode the chat request goes to the upstream's /v1/chat/completions and the upstream renders it. In
// `tokens` mode the gateway renders the prompt — continuing the call's agent thread from the exact ids the model saw
// and sampled where the messages extend an earlier call's messages and answer — sends the ids to /v1/completions,
// and reads the answer back as a chat completion (completion-as-chat.ts), so the relays and translators that follow
// are the same in both modes. A call tokens mode cannot serve falls back to messages mode, counted and recorded.
import type { ReasoningField } from "../../tokenizer/reasoning-field.ts";
import type { PromptRecord } from "../../store/records.ts";
import type { ModelChatFormat } from "../../tokenizer/model-format.ts";
import type { GatewayContext } from "../context.ts";
import { openExchange, type Exchange, type ExchangeSpec, type HarnessCall } from "../relay/exchange.ts";
import type { Json } from "../upstream/fields.ts";
import type { ApiCodec, PreparedRequest } from "../upstream/flavor.ts";
import { vllmFlavor } from "../upstream/vllm.ts";
import type { AnsweredChoice } from "./answer.ts";
import { CompletionAsChat } from "./completion-as-chat.ts";
import { chainSeed, MessageChain } from "./message-keys.ts";
import { completionBody, enableThinkingOf, fallbackReason, requestedMaxTokens } from "./options.ts";
import { renderFull, renderSuffix, SuffixRenderError, turnClosers, type RenderSettings } from "./render.ts";
import { idsOf, ThreadBook, type ThreadNode } from "./threads.ts";
import { trailingContextSpan } from "./moved-context.ts";
import { upstreamContextLength } from "./context-length.ts";
import { decisionPrefix } from "../branching/index.ts";

export const PROMPT_MODES = ["messages", "tokens"] as const;
export type PromptModeName = (typeof PROMPT_MODES)[number];

/** A chat-shaped call on its way upstream, as a surface describes it. */
export interface ChatCallSpec extends Pick<
  ExchangeSpec,
  "api" | "stream" | "model" | "omitHeader" | "warnings" | "maxTokensCap"
> {
  /** The chat-completions request (the served model's name already in it). */
  chat: Json;
}

/** What a relay needs: the exchange, the codec of the chat answer it reads, and what was asked of the upstream. */
export interface OpenedChat {
  ex: Exchange;
  codec: ApiCodec;
  prepared: PreparedRequest;
}

interface TokenPlan {
  promptIds: number[];
  parent: ThreadNode | null;
  record: PromptRecord;
  chain: MessageChain;
  settings: RenderSettings;
  /** Where the last message's ids lie in the prompt, when a harness may move it (moved-context.ts). */
  trailing: { start: number; end: number } | null;
}

/** The tokens prompt mode: the served model's chat format and the agent threads of recent rollouts. */
export class TokenPrompts {
  readonly format: ModelChatFormat;
  /** The vLLM version answered as: where answers carry reasoning and which history field is rendered. */
  readonly reasoningField: ReasoningField;
  readonly #threads: ThreadBook;

  constructor(
    ctx: Pick<GatewayContext, "store">,
    format: ModelChatFormat,
    options: { maxRollouts?: number; reasoningField?: ReasoningField } = {},
  ) {
    this.format = format;
    this.reasoningField = options.reasoningField ?? "reasoning";
    this.#threads = new ThreadBook(ctx.store, options.maxRollouts);
  }

  /** The prompt of a chat request: continued from an earlier call of its thread, or rendered whole. */
  plan(rolloutId: string | null, chat: Json): TokenPlan {
    const plan = this.#plan(rolloutId, chat);
    const messages = chat["messages"] as Json[];
    if (rolloutId !== null) plan.trailing = trailingContextSpan(this.format, messages, plan.settings, plan.promptIds);
    return plan;
  }

  #plan(rolloutId: string | null, chat: Json): TokenPlan {
    const messages = chat["messages"] as Json[];
    const tools = Array.isArray(chat["tools"]) && chat["tools"].length ? (chat["tools"] as unknown[]) : null;
    const effort = chat["reasoning_effort"];
    const settings: RenderSettings = {
      tools,
      enableThinking: enableThinkingOf(chat),
      reasoningEffort: typeof effort === "string" ? effort : null,
      reasoningField: this.reasoningField,
    };
    const chain = new MessageChain(chainSeed(chat["model"], tools), messages);
    let newThread = "unattributed";
    if (rolloutId !== null) {
      const threads = this.#threads.of(rolloutId);
      newThread = threads.empty ? "first_call" : "no_earlier_answer_matched";
      for (let k = messages.length - 1; k >= 1; k--) {
        // Else the messages may be an earlier call's without its last one, a context message the harness moved.
        const strict = threads.find(chain, k);
        const node = strict ?? threads.findMoved(chain, k);
        if (!node) continue;
        try {
          const suffix = renderSuffix(this.format, messages[k - 1]!, messages.slice(k), settings);
          const earlier = idsOf(node);
          // A turn cut short (max_tokens, a stop string) is closed as the template closes every turn.
          if (!turnClosers(this.format).includes(earlier[earlier.length - 1]!)) earlier.push(this.format.turnEnd.id);
          for (const id of suffix) earlier.push(id);
          const record: PromptRecord = {
            mode: "tokens",
            thread: node.thread,
            parent: { seq: node.seq, choice: node.choice },
          };
          if (!strict) record.movedContext = true;
          return { promptIds: earlier, parent: node, record, chain, settings, trailing: null };
        } catch (error) {
          if (!(error instanceof SuffixRenderError)) throw error;
          newThread = `suffix_render: ${error.message}`;
          break;
        }
      }
    }
    const promptIds = renderFull(this.format, messages, settings);
    return {
      promptIds,
      parent: null,
      record: { mode: "tokens", parent: null, newThread },
      chain,
      settings,
      trailing: null,
    };
  }

  /** Remembers a completed call's prompt and answers, so that later calls of its thread continue from them. */
  remember(
    rolloutId: string,
    seq: number,
    plan: TokenPlan,
    answers: readonly AnsweredChoice[],
    keys: readonly string[],
  ): void {
    const trailing = plan.record.trailingContext;
    this.#threads.of(rolloutId).add({
      seq,
      thread: plan.record.thread ?? seq,
      parent: plan.parent,
      promptIds: plan.promptIds,
      choices: answers.map((answer, i) => ({ tokenIds: answer.tokenIds, key: keys[i]! })),
      trailing: trailing ? { start: trailing.start, end: trailing.end, keys: trailing.continuation } : null,
    });
  }
}

function messagesMode(
  ctx: GatewayContext,
  call: HarnessCall,
  spec: ChatCallSpec,
  prompt?: PromptRecord,
): Promise<OpenedChat | null> {
  const prepared = ctx.flavor.chat.prepare(spec.chat, spec.stream, ctx.config.routedExperts ? { startLen: 0 } : null);
  return openExchange(ctx, call, {
    ...spec,
    upstreamPath: "/v1/chat/completions",
    forwarded: prepared.forwarded,
    prompt,
  }).then((ex) => (ex ? { ex, codec: ctx.flavor.chat, prepared } : null));
}

/**
 * Sends a chat-shaped call upstream in the gateway's prompt mode and runs `relay` over the answer (the surface's own
 * relay: native chat, or a translation to Messages / Responses).
 */
export async function runChatCall(
  ctx: GatewayContext,
  call: HarnessCall,
  spec: ChatCallSpec,
  relay: (opened: OpenedChat) => Promise<void>,
): Promise<void> {
  const tokens = ctx.tokenPrompts;
  if (!tokens) {
    const opened = await messagesMode(ctx, call, spec);
    if (opened) await relay(opened);
    return;
  }
  const fallback = (reason: string): Promise<OpenedChat | null> => {
    ctx.metrics.promptModes.inc({ mode: "messages", reason });
    return messagesMode(ctx, call, spec, { mode: "messages", fallbackReason: reason });
  };
  const reason = fallbackReason(spec.chat);
  if (reason !== null) {
    const opened = await fallback(reason);
    if (opened) await relay(opened);
    return;
  }
  const rolloutId = call.attribution.rolloutId;
  let plan: TokenPlan;
  try {
    plan = tokens.plan(rolloutId, spec.chat);
  } catch (error) {
    // The template refused the history (Qwen3's raises on some): the upstream's chat route answers it as it would.
    ctx.log.warn({ rollout: rolloutId, err: error }, "tokens prompt mode: rendering failed, served as messages");
    const opened = await fallback("render_failed");
    if (opened) await relay(opened);
    return;
  }
  // A branch cut at a token position (gateway/branching): the backbone's sampled ids up to it are sent as prompt and
  // given back to the harness in front of what the model samples on, as one answer.
  const prefix = await decisionPrefix(ctx, call.req, plan.promptIds);
  const sentIds = prefix.length ? [...plan.promptIds, ...prefix] : plan.promptIds;
  let maxTokens = requestedMaxTokens(spec.chat);
  if (maxTokens === null) {
    // /v1/completions would stop after 16 tokens: a chat call's default is the rest of the context.
    const contextLength = await upstreamContextLength(ctx);
    if (contextLength === null) {
      const opened = await fallback("context_length_unknown");
      if (opened) await relay(opened);
      return;
    }
    maxTokens = Math.max(1, contextLength - sentIds.length);
  } else maxTokens = Math.max(1, maxTokens - prefix.length);
  ctx.metrics.promptModes.inc({
    mode: "tokens",
    reason: plan.parent ? "continued" : plan.record.newThread!.split(":")[0]!,
  });
  // Routed experts: the positions of the thread whose routing the rollout holds are not asked for again (SGLang).
  const routing = ctx.config.routedExperts
    ? { startLen: rolloutId === null ? 0 : ctx.store.routedPrefix(rolloutId, sentIds) }
    : null;
  const prepared = ctx.flavor.completions.prepare(completionBody(spec.chat, sentIds, maxTokens), spec.stream, routing);
  const tools = spec.chat["tools"];
  const answerSettings = {
    format: tokens.format,
    toolParsing: Array.isArray(tools) && tools.length > 0 && spec.chat["tool_choice"] !== "none",
    includeReasoning: spec.chat["include_reasoning"] !== false,
    reasoningField: tokens.reasoningField,
    tools: Array.isArray(tools) ? tools : null,
    prefix: prefix.length ? prefix : null,
  };
  let answered: { answers: AnsweredChoice[]; keys: string[] } | null = null;
  const ex = await openExchange(ctx, call, {
    ...spec,
    upstreamPath: "/v1/completions",
    forwarded: prepared.forwarded,
    prompt: plan.record,
    toolCount: Array.isArray(tools) ? tools.length : 0,
    chatCodec: vllmFlavor.chat,
    translateAnswer: (upstream, recorder) => {
      recorder.notePrompt({ thread: plan.record.thread ?? recorder.seq });
      plan.record.thread ??= recorder.seq;
      return new CompletionAsChat(upstream, answerSettings, (answers) => {
        const keys = answers.map((answer) => plan.chain.extendedBy(answer.message));
        recorder.notePrompt({ continuation: keys });
        const moved = plan.trailing && answers.map((answer) => plan.chain.extendedWithoutLastBy(answer.message) ?? "");
        if (moved) {
          plan.record.trailingContext = { ...plan.trailing!, continuation: moved };
          recorder.notePrompt({ trailingContext: plan.record.trailingContext });
        }
        answered = { answers, keys };
      });
    },
  });
  if (!ex) return;
  const harnessWantsNothing = { promptTokenIds: false, tokenIds: false, logprobs: false, routedExperts: false };
  await relay({
    ex,
    codec: vllmFlavor.chat,
    prepared: { forwarded: prepared.forwarded, wants: harnessWantsNothing, upstreamStream: prepared.upstreamStream },
  });
  const done = answered as { answers: AnsweredChoice[]; keys: string[] } | null;
  if (rolloutId !== null && done && ex.recorder.status === "ok")
    tokens.remember(rolloutId, ex.recorder.seq, plan, done.answers, done.keys);
}
