// POST /v1/completions as SGLang answers it: the vLLM flavour's generation in SGLang's shapes. `return_token_ids`
// adds choice-level `prompt_token_ids` / `token_ids` (absent when not asked for) — in streams too: prompt ids on
// each choice's first chunk, each chunk's ids its delta. Model names are not checked.
import type { HandlerInput } from "../flavor.ts";
import { withPrompts, type Reply } from "../reply.ts";
import { completionLogprobs, randomId } from "../vllm/common.ts";
import { completionSteps, planCompletions, promptsOf, usageOf, type Choice } from "../vllm/completions.ts";
import { completionRequest, parseBody, type CompletionRequest } from "../vllm/requests.ts";
import { matchedStop, sglangRoutedExperts, sglangUsage } from "./common.ts";

interface Head {
  id: string;
  created: number;
  model: string;
}

export function sglangCompletions({ body, ctx }: HandlerInput): Reply {
  const req = parseBody(completionRequest, body);
  const choices = planCompletions(req.stream ? req : { ...req, stream_options: null }, ctx);
  const n = req.n ?? 1;
  const head = { id: randomId(), created: Math.floor(Date.now() / 1000), model: req.model ?? "default" };
  const first = choices[0];
  const sglext = first ? sglangRoutedExperts(req, ctx, first.promptIds, first.gen.ids) : null;
  const reply = req.stream ? streamReply(req, head, choices, n, sglext) : jsonReply(req, head, choices, n, sglext);
  return withPrompts(reply, promptsOf(choices, n));
}

function usage(choices: Choice[], n: number) {
  const u = usageOf(choices, n);
  return sglangUsage(u.prompt_tokens, u.completion_tokens);
}

type Sglext = Record<string, unknown> | null;

function jsonReply(req: CompletionRequest, head: Head, choices: Choice[], n: number, sglext: Sglext): Reply {
  const ids = req.return_token_ids === true;
  const body = {
    ...head,
    object: "text_completion",
    choices: choices.map(({ promptIds, gen, logprobs, format }, index) => ({
      index,
      text: gen.text,
      logprobs: logprobs ? completionLogprobs(logprobs, req.logprobs ?? 0, 0, format.tokenString) : null,
      finish_reason: gen.finishReason,
      matched_stop: matchedStop(gen),
      ...(ids ? { token_ids: gen.ids, prompt_token_ids: promptIds } : {}),
    })),
    usage: usage(choices, n),
    metadata: null,
    ...(sglext ? { sglext } : {}),
  };
  return { kind: "json", status: 200, body, steps: Math.max(...choices.map((c) => c.gen.ids.length)) };
}

function streamReply(req: CompletionRequest, head: Head, choices: Choice[], n: number, sglext: Sglext): Reply {
  const ids = req.return_token_ids === true;
  const base = { ...head, object: "text_completion" };
  const steps = completionSteps(
    choices,
    ({ choice: { promptIds, gen, logprobs, format }, index, t, last, text, offset }) => {
      const choice: Record<string, unknown> = {
        index,
        text,
        logprobs: logprobs ? completionLogprobs([logprobs[t]!], req.logprobs ?? 0, offset, format.tokenString) : null,
        finish_reason: last ? gen.finishReason : null,
        matched_stop: last ? matchedStop(gen) : null,
      };
      if (ids) choice["token_ids"] = [gen.ids[t]!];
      if (ids && t === 0) choice["prompt_token_ids"] = promptIds;
      return JSON.stringify({ ...base, choices: [choice], usage: null });
    },
  );
  // The usage chunk is dumped with exclude_none.
  const { prompt_tokens_details: _unset, ...final } = usage(choices, n);
  const tail = sglext ? [JSON.stringify({ ...base, choices: [], usage: null, sglext })] : [];
  if (req.stream_options?.include_usage) tail.push(JSON.stringify({ ...base, choices: [], usage: final }));
  return { kind: "stream", steps, tail };
}
