// POST /v1/chat/completions as SGLang answers it (OpenAI layer, `--reasoning-parser qwen3 --tool-call-parser qwen25`):
// the same generation as the vLLM flavour, written in SGLang's shapes. Token ids: `return_token_ids` /
// `return_prompt_token_ids` put choice-level `token_ids` / `prompt_token_ids` on a non-streamed response (absent
// when not asked for); a streamed request with either flag (or `return_meta_info`) is refused with a 400, so chat
// streams never carry ids. Model names are not checked: the response echoes the requested one ("default" if none).
import type { HandlerInput } from "../flavor.ts";
import {
  answerDeltas,
  parseAnswer,
  toolSyntax,
  type TokenDelta,
  type ToolSyntax,
} from "../../tokenizer/output-parser.ts";
import { badRequest, withPrompts, type Reply } from "../reply.ts";
import type { ModelChatFormat } from "../../tokenizer/model-format.ts";
import { planChat, type Choice } from "../vllm/chat.ts";
import { chatLogprobEntry, randomId } from "../vllm/common.ts";
import { chatRequest, parseBody, type ChatRequest } from "../vllm/requests.ts";
import { matchedStop, sglangRoutedExperts, sglangUsage } from "./common.ts";

const STREAM_REFUSED: Record<string, string> = {
  return_prompt_token_ids:
    "return_prompt_token_ids is not supported with streaming. Please set stream=false when using return_prompt_token_ids=true.",
  return_token_ids:
    "return_token_ids is not supported with streaming on /v1/chat/completions. Please set stream=false when using return_token_ids=true.",
  return_meta_info:
    "return_meta_info is not supported with streaming. Please set stream=false when using return_meta_info=true.",
};

interface Head {
  id: string;
  created: number;
  model: string;
}

export function sglangChat({ body, ctx }: HandlerInput): Reply {
  const req = parseBody(chatRequest, body);
  if (req.stream) {
    for (const [flag, message] of Object.entries(STREAM_REFUSED)) if (req[flag] === true) throw badRequest(message);
  }
  // SGLang ignores stream_options on a non-streamed request (vLLM refuses it).
  const plan = planChat(req.stream ? req : { ...req, stream_options: null }, ctx);
  const head = { id: `chatcmpl-${randomId()}`, created: Math.floor(Date.now() / 1000), model: req.model ?? "default" };
  const sglext = sglangRoutedExperts(req, ctx, plan.promptIds, plan.choices[0]?.gen.ids);
  const reply = req.stream
    ? streamReply(req, head, plan.promptIds, plan.choices, plan.toolParsing, plan.topK, sglext, plan.format)
    : jsonReply(
        req,
        head,
        plan.promptIds,
        plan.choices,
        plan.toolParsing ? plan.syntax : null,
        plan.topK,
        sglext,
        plan.format,
      );
  return withPrompts(reply, [plan.promptIds]);
}

function toolCallId(): string {
  return `call_${randomId().slice(0, 24)}`;
}

function jsonReply(
  req: ChatRequest,
  head: Head,
  promptIds: number[],
  choices: Choice[],
  toolParsing: ToolSyntax | null,
  topK: number,
  sglext: Record<string, unknown> | null,
  format: ModelChatFormat,
): Reply {
  const ids = req["return_token_ids"] === true;
  const promptIdsWanted = ids || req["return_prompt_token_ids"] === true;
  const out = choices.map(({ gen, logprobs }, index) => {
    const parsed = parseAnswer(format, gen.ids, gen.text, toolParsing !== null, toolParsing ?? toolSyntax("hermes"));
    const choice: Record<string, unknown> = {
      index,
      message: {
        role: "assistant",
        // SGLang writes "" rather than null for empty content.
        content: parsed.content ?? "",
        reasoning_content: parsed.reasoning || null,
        tool_calls: parsed.toolCalls.length
          ? parsed.toolCalls.map((call, k) => ({
              id: toolCallId(),
              index: k,
              type: "function",
              function: { name: call.name, arguments: call.arguments },
            }))
          : null,
      },
      logprobs: logprobs ? { content: logprobs.map((lp) => chatLogprobEntry(lp, topK, format.tokenString)) } : null,
      finish_reason: parsed.toolCalls.length > 0 && gen.finishReason === "stop" ? "tool_calls" : gen.finishReason,
      matched_stop: matchedStop(gen),
    };
    if (promptIdsWanted) choice["prompt_token_ids"] = promptIds;
    if (ids) choice["token_ids"] = gen.ids;
    return choice;
  });
  const body = {
    ...head,
    object: "chat.completion",
    choices: out,
    usage: sglangUsage(
      promptIds.length,
      choices.reduce((n, c) => n + c.gen.ids.length, 0),
    ),
    metadata: { weight_version: "default" },
    // Response level (SglExt); omitted when empty.
    ...(sglext ? { sglext } : {}),
  };
  return { kind: "json", status: 200, body, steps: Math.max(...choices.map((c) => c.gen.ids.length)) };
}

function delta(fields: Record<string, unknown>): Record<string, unknown> {
  return { role: null, content: null, reasoning_content: null, tool_calls: null, ...fields };
}

function deltaFields(d: TokenDelta, callIds: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (d.content !== undefined) out["content"] = d.content;
  if (d.reasoning_content !== undefined) out["reasoning_content"] = d.reasoning_content;
  if (d.toolCalls) {
    out["tool_calls"] = d.toolCalls.map((call) => {
      if (call.name !== undefined) callIds[call.index] ??= toolCallId();
      return {
        id: call.name !== undefined ? callIds[call.index] : null,
        index: call.index,
        type: "function",
        function: { name: call.name ?? null, arguments: call.arguments ?? "" },
      };
    });
  }
  return out;
}

// SGLang dumps every field of a chunk (nulls included); tokens that add no text send no chunk; each choice ends with
// a separate finish chunk; the usage chunk follows when stream_options.include_usage is set.
function streamReply(
  req: ChatRequest,
  head: Head,
  promptIds: number[],
  choices: Choice[],
  toolParsing: boolean,
  topK: number,
  sglext: Record<string, unknown> | null,
  format: ModelChatFormat,
): Reply {
  const base = { id: head.id, object: "chat.completion.chunk", created: head.created, model: head.model };
  const chunk = (index: number, d: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      ...base,
      choices: [{ index, delta: d, logprobs: null, finish_reason: null, matched_stop: null, ...extra }],
      usage: null,
    });
  const steps: string[][] = [choices.map((_, i) => chunk(i, delta({ role: "assistant", content: "" })))];
  const plans = choices.map(({ gen }) => ({
    deltas: answerDeltas(format, gen, toolParsing),
    callIds: [] as string[],
    toolsStreamed: false,
  }));
  const longest = Math.max(...choices.map((c) => c.gen.ids.length));
  for (let t = 0; t < longest; t++) {
    const step = (steps[t + 1] ??= []);
    choices.forEach(({ gen, logprobs }, i) => {
      if (t >= gen.ids.length) return;
      const plan = plans[i]!;
      const d = plan.deltas[t] ?? null;
      if (!d && !logprobs) return;
      if (d?.toolCalls) plan.toolsStreamed = true;
      step.push(
        chunk(i, delta(d ? deltaFields(d, plan.callIds) : {}), {
          logprobs: logprobs ? { content: [chatLogprobEntry(logprobs[t]!, topK, format.tokenString)] } : null,
        }),
      );
    });
  }
  const tail = choices.map(({ gen }, i) =>
    chunk(i, delta({}), {
      finish_reason: plans[i]!.toolsStreamed && gen.finishReason === "stop" ? "tool_calls" : gen.finishReason,
      matched_stop: matchedStop(gen),
    }),
  );
  // After the finish chunks, before usage: a chunk without choices carrying the response-level sglext.
  if (sglext) tail.push(JSON.stringify({ ...base, choices: [], usage: null, sglext }));
  if (req.stream_options?.include_usage) {
    const completion = choices.reduce((n, c) => n + c.gen.ids.length, 0);
    tail.push(JSON.stringify({ ...base, choices: [], usage: sglangUsage(promptIds.length, completion) }));
  }
  return { kind: "stream", steps, tail };
}
