// What rlgate asks of a vLLM (>= 0.10.2) upstream, and how it reads token ids and logprobs back.
// rlgate adds `return_token_ids` and `logprobs` to every captured request and remembers whether the harness asked for
// them itself, so the response can be given back exactly as the upstream would have sent it to the harness.
import { ChatStreamAssembler, captureChatResponse } from "../surfaces/chat/assembler.ts";
import { CompletionStreamAssembler, captureCompletionResponse } from "../surfaces/completions/assembler.ts";
import { choicesOf, isObject, type Json } from "./fields.ts";
import type { ApiCodec, HarnessWants, PreparedRequest, UpstreamFlavor } from "./flavor.ts";
import { parseChatResponseScanned, scanChatChunk } from "./chat-chunk-scan.ts";
import { nullValues, type NullEdits } from "./json-splice.ts";
import { chatChunksFromResponse, completionChunksFromResponse } from "./chat-chunks.ts";
import { isRoutingOnlyChunk, stripRouting, type RoutingAsk } from "./routed-experts.ts";

export function prepareChatRequest(body: Json, harnessStream: boolean, routing?: RoutingAsk | null): PreparedRequest {
  const ids = body["return_token_ids"] === true;
  const wants: HarnessWants = { promptTokenIds: ids, tokenIds: ids, logprobs: body["logprobs"] === true };
  const forwarded: Json = { ...body, return_token_ids: true };
  if (!wants.logprobs) forwarded["logprobs"] = true;
  return wholeForRouting(forwarded, wants, harnessStream, routing);
}

/**
 * vLLM sends routed experts (server flag --enable-return-routed-experts) on whole responses only, until it streams
 * them (its RFC #56745): with routing asked for, a streamed call goes upstream unstreamed and is re-emitted.
 */
function wholeForRouting(
  forwarded: Json,
  wants: HarnessWants,
  harnessStream: boolean,
  routing: RoutingAsk | null | undefined,
): PreparedRequest {
  if (!routing || !harnessStream) return { forwarded, wants, upstreamStream: harnessStream };
  forwarded["stream"] = false;
  delete forwarded["stream_options"];
  return { forwarded, wants, upstreamStream: false };
}

/** Completions: `logprobs` is a count there; 1 returns the sampled token's logprob (and one top entry). */
export function prepareCompletionRequest(
  body: Json,
  harnessStream: boolean,
  routing?: RoutingAsk | null,
): PreparedRequest {
  const ids = body["return_token_ids"] === true;
  const wants: HarnessWants = { promptTokenIds: ids, tokenIds: ids, logprobs: body["logprobs"] != null };
  const forwarded: Json = { ...body, return_token_ids: true };
  if (!wants.logprobs) forwarded["logprobs"] = 1;
  return wholeForRouting(forwarded, wants, harnessStream, routing);
}

/**
 * Sets what the harness did not ask for to null. vLLM serializes these fields as null when they were not requested
 * (whole bodies, and stream chunks too: it dumps chunks with exclude_unset, which keeps explicit Nones), so the
 * harness gets the bytes it would have got.
 */
function nullUnwanted(body: Json, wants: HarnessWants): void {
  if (wants.routedExperts === false) stripRouting(body);
  if (!wants.promptTokenIds && "prompt_token_ids" in body) body["prompt_token_ids"] = null;
  for (const choice of choicesOf(body)) {
    if (!wants.promptTokenIds && "prompt_token_ids" in choice) choice["prompt_token_ids"] = null;
    if (!wants.tokenIds && "token_ids" in choice) choice["token_ids"] = null;
    if (!wants.logprobs && "logprobs" in choice) choice["logprobs"] = null;
  }
}

/**
 * True for a chunk that exists only to carry token ids: vLLM emits tokens that produce no text (`<think>`,
 * `<tool_call>` markup) as empty deltas when token ids were requested, and skips them otherwise. Such chunks are
 * dropped for a harness that did not ask for ids, so it receives the chunks it would have received directly.
 */
export function isTokenOnlyChunk(chunk: Json): boolean {
  if (chunk["usage"] != null) return false;
  const choices = chunk["choices"];
  if (!Array.isArray(choices) || choices.length === 0) return false;
  for (const choice of choices) {
    if (!isObject(choice)) return false;
    if (choice["finish_reason"] != null) return false;
    const delta = choice["delta"];
    if (!isObject(delta) || Object.keys(delta).length > 0) return false;
  }
  return true;
}

/** The keys `nullUnwanted` sets to null in `body`, with how many of each it meets (the text splice checks them). */
function unwantedKeys(body: Json, wants: HarnessWants): NullEdits {
  let prompt = !wants.promptTokenIds && "prompt_token_ids" in body ? 1 : 0;
  let ids = 0;
  let logprobs = 0;
  for (const choice of choicesOf(body)) {
    if (!wants.promptTokenIds && "prompt_token_ids" in choice) prompt++;
    if (!wants.tokenIds && "token_ids" in choice) ids++;
    if (!wants.logprobs && "logprobs" in choice) logprobs++;
  }
  const edits: Array<{ key: string; count: number }> = [];
  if (!wants.promptTokenIds) edits.push({ key: "prompt_token_ids", count: prompt });
  if (!wants.tokenIds) edits.push({ key: "token_ids", count: ids });
  if (!wants.logprobs) edits.push({ key: "logprobs", count: logprobs });
  return edits;
}

/** A chunk's text without the unwanted fields: spliced where the text allows it, else serialized again. */
function harnessChunk(data: string, chunk: Json, wants: HarnessWants): string {
  const spliced = nullValues(data, unwantedKeys(chunk, wants));
  if (spliced !== null) return spliced;
  nullUnwanted(chunk, wants);
  return JSON.stringify(chunk);
}

const chat: ApiCodec = {
  prepare: prepareChatRequest,
  captureWhole: captureChatResponse,
  stripWhole: nullUnwanted,
  newAssembler: (options) => new ChatStreamAssembler(options),
  // A streamed call asked for routing went upstream whole: the stream a vLLM chat stream would have been.
  reemit(response, harnessRequest) {
    const options = harnessRequest["stream_options"];
    return chatChunksFromResponse(response, { includeUsage: isObject(options) && options["include_usage"] === true });
  },
  harnessChunk(data, chunk, wants) {
    if (!wants.tokenIds && isTokenOnlyChunk(chunk)) return null;
    // Routing relayed from SGLang in tokens mode (a chunk without choices) is the capture's, not the harness's.
    if (wants.routedExperts === false && isRoutingOnlyChunk(chunk)) return null;
    return harnessChunk(data, chunk, wants);
  },
  // Logprob entries are read by a scan only when the harness does not get them: they reach it as null.
  parseWhole(text, wants, recent) {
    return wants.logprobs || wants.topEntries ? null : parseChatResponseScanned(text, recent);
  },
  // The scan keeps only each logprob entry's number: the entries reach the harness and the record only when asked for.
  scanChunk(data, wants, recent) {
    if (wants.logprobs || wants.topEntries || (wants.routedExperts === false && data.includes('"routed_experts"')))
      return null;
    const nulls = { tokenIds: !wants.tokenIds, promptTokenIds: !wants.promptTokenIds };
    const scanned = scanChatChunk(data, nulls, recent);
    if (scanned === null || wants.tokenIds || !isTokenOnlyChunk(scanned.chunk)) return scanned;
    return { chunk: scanned.chunk, harnessText: null };
  },
};

const completions: ApiCodec = {
  prepare: prepareCompletionRequest,
  captureWhole: captureCompletionResponse,
  stripWhole: nullUnwanted,
  newAssembler: () => new CompletionStreamAssembler(),
  harnessChunk,
  reemit(response, harnessRequest) {
    const options = harnessRequest["stream_options"];
    return completionChunksFromResponse(response, {
      includeUsage: isObject(options) && options["include_usage"] === true,
    });
  },
};

export const vllmFlavor: UpstreamFlavor = { name: "vllm", chat, completions };
