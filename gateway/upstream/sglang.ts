// What rlgate asks of an SGLang upstream, and how it reads token ids back. SGLang's OpenAI layer takes
// `return_token_ids` (and `return_prompt_token_ids`) and answers with choice-level `prompt_token_ids` / `token_ids`,
// omitting them when not requested. Its chat streams carry no token ids at all (it refuses the flags with stream=true),
// so a streamed chat call is sent upstream unstreamed and its response re-emitted to the harness as a stream: the
// ids are exact, at the cost of the harness's first byte arriving when the generation is complete.
// Completions streams do carry ids (prompt ids on each choice's first chunk, each chunk's ids its delta).
import { ChatStreamAssembler, captureChatResponse } from "../surfaces/chat/assembler.ts";
import { CompletionStreamAssembler, captureCompletionResponse } from "../surfaces/completions/assembler.ts";
import { chatChunksFromResponse } from "./chat-chunks.ts";
import { choicesOf, isObject, type Json } from "./fields.ts";
import type { ApiCodec, HarnessWants, UpstreamFlavor } from "./flavor.ts";
import { isRoutingOnlyChunk, stripRouting, type RoutingAsk } from "./routed-experts.ts";

const ID_FLAGS = ["return_token_ids", "return_prompt_token_ids", "return_meta_info"] as const;

/** SGLang drops token-id fields it was not asked for (pydantic serializer pops them) and writes logprobs as null. */
function dropUnwanted(body: Json, wants: HarnessWants): void {
  if (wants.routedExperts === false) stripRouting(body);
  for (const choice of choicesOf(body)) {
    if (!wants.promptTokenIds) delete choice["prompt_token_ids"];
    if (!wants.tokenIds) delete choice["token_ids"];
    if (!wants.logprobs && "logprobs" in choice) choice["logprobs"] = null;
  }
}

function wantsOf(body: Json, logprobs: boolean): HarnessWants {
  const tokenIds = body["return_token_ids"] === true;
  return {
    promptTokenIds: tokenIds || body["return_prompt_token_ids"] === true,
    tokenIds,
    logprobs,
    routedExperts: body["return_routed_experts"] === true,
  };
}

/** Asks for routed experts from `routed_experts_start_len` on (sent only when above SGLang's default, 0). */
function askRouting(forwarded: Json, routing: RoutingAsk | null | undefined): void {
  if (!routing) return;
  forwarded["return_routed_experts"] = true;
  if (routing.startLen > 0) forwarded["routed_experts_start_len"] = routing.startLen;
  else delete forwarded["routed_experts_start_len"];
}

const chat: ApiCodec = {
  prepare(body, harnessStream, routing) {
    // A harness that asks SGLang itself for ids on a stream gets SGLang's own answer (a 400), as it would directly.
    if (harnessStream && ID_FLAGS.some((flag) => body[flag] === true)) {
      return { forwarded: body, wants: { promptTokenIds: true, tokenIds: true, logprobs: true }, upstreamStream: true };
    }
    const wants = wantsOf(body, body["logprobs"] === true);
    const forwarded: Json = { ...body, return_token_ids: true };
    if (!wants.logprobs) forwarded["logprobs"] = true;
    askRouting(forwarded, routing);
    if (harnessStream) {
      forwarded["stream"] = false;
      delete forwarded["stream_options"];
    }
    return { forwarded, wants, upstreamStream: false };
  },
  captureWhole: captureChatResponse,
  stripWhole: dropUnwanted,
  newAssembler: (options) => new ChatStreamAssembler(options),
  // Reached only for a harness that asked for ids itself (a stream SGLang answers as it does directly): nothing to strip.
  harnessChunk: (data) => data,
  reemit(response, harnessRequest) {
    const options = harnessRequest["stream_options"];
    return chatChunksFromResponse(response, { includeUsage: isObject(options) && options["include_usage"] === true });
  },
};

const completions: ApiCodec = {
  prepare(body, harnessStream, routing) {
    const wants = wantsOf(body, body["logprobs"] != null);
    const forwarded: Json = { ...body, return_token_ids: true };
    if (!wants.logprobs) forwarded["logprobs"] = 1;
    askRouting(forwarded, routing);
    return { forwarded, wants, upstreamStream: harnessStream };
  },
  captureWhole: captureCompletionResponse,
  stripWhole: dropUnwanted,
  newAssembler: () => new CompletionStreamAssembler(),
  // SGLang omits fields rather than writing null: the chunk is serialized again without them.
  harnessChunk(_data, chunk, wants) {
    if (wants.routedExperts === false && isRoutingOnlyChunk(chunk)) return null;
    dropUnwanted(chunk, wants);
    return JSON.stringify(chunk);
  },
};

export const sglangFlavor: UpstreamFlavor = { name: "sglang", chat, completions };
