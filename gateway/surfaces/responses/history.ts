// What `previous_response_id` refers to: the conversation of each response (its input and its output items, as chat
// messages — the output translated exactly as a client replaying those items would send them). Recent ones are kept
// in memory by response id (least recently used first out); one that is not there (served by another gateway worker,
// evicted, or created before a restart) is rebuilt from the stored call that delivered it, and the calls before it in
// its chain. A response created with `store: false` is not kept — a client that continues such a response gets
// OpenAI's "previous response not found" error, as from OpenAI.
// Messages are shared between a response and its successors, so a long conversation costs its messages once.
import { LRUCache } from "lru-cache";
import { RawJson, SplicedJson, type CallRecord } from "../../../store/records.ts";
import type { GatewayContext } from "../../context.ts";
import { isObject, type Json } from "../../upstream/fields.ts";
import { inputMessages, parseResponsesRequest, toChatRequest, type ResponsesRequest } from "./request.ts";

const CAPACITY = 4096;
/** Stored calls of a rollout looked at, newest first, to find a response that is not in memory. */
const MAX_SCANNED_CALLS = 10_000;

export class ResponseHistory {
  readonly #ctx: GatewayContext;
  readonly #recent = new LRUCache<string, readonly Json[]>({ max: CAPACITY });

  constructor(ctx: GatewayContext) {
    this.#ctx = ctx;
  }

  /** Remembers what a completed response leaves for `previous_response_id` (nothing with `store: false`). */
  remember(
    id: string,
    request: ResponsesRequest,
    conversation: readonly Json[],
    output: unknown,
    tools: ToolMap,
  ): void {
    if (request["store"] !== false) this.#recent.set(id, [...conversation, ...inputMessages(output, { tools })]);
  }

  /** The conversation response `id` ended with, from memory or rebuilt from the rollout's stored calls. */
  find(rolloutId: string | null, id: string): readonly Json[] | undefined {
    const known = this.#recent.get(id);
    if (known) return known;
    // A chain continued on another worker: each response's call is found, newest first, back to one this worker
    // knows or to the chain's start; the conversations are then rebuilt forwards.
    const chain: Array<{ id: string; call: CallRecord; request: ResponsesRequest }> = [];
    let previous: readonly Json[] = [];
    for (let at: string | undefined = id; at !== undefined;) {
      const call = this.#storedCall(rolloutId, at);
      if (!call) return undefined;
      const request = parseResponsesRequest(plain(call.requestReceived));
      if (request["store"] === false) return undefined;
      chain.push({ id: at, call, request });
      at = request.previous_response_id ?? undefined;
      if (at !== undefined) {
        const cached = this.#recent.get(at);
        if (cached) {
          previous = cached;
          break;
        }
      }
    }
    for (const { id: responseId, call, request } of chain.reverse()) {
      const { conversation, tools } = toChatRequest(request, previous);
      const delivered = plain(call.response);
      this.remember(responseId, request, conversation, isObject(delivered) ? delivered["output"] : undefined, tools);
      previous = this.#recent.get(responseId)!;
    }
    return previous;
  }

  /** The stored Responses call that delivered response `id` as ok, looked for from the rollout's newest call. */
  #storedCall(rolloutId: string | null, id: string): CallRecord | undefined {
    return this.#ctx.store.findCall(
      rolloutId,
      "responses",
      (response) => isObject(response) && response["id"] === id,
      MAX_SCANNED_CALLS,
    );
  }
}

type ToolMap = ReturnType<typeof toChatRequest>["tools"];

function plain(body: unknown): unknown {
  return body instanceof RawJson || body instanceof SplicedJson ? body.value() : body;
}

const histories = new WeakMap<GatewayContext, ResponseHistory>();

export function responseHistory(ctx: GatewayContext): ResponseHistory {
  let history = histories.get(ctx);
  if (!history) histories.set(ctx, (history = new ResponseHistory(ctx)));
  return history;
}
