// What `previous_response_id` refers to: the conversation of each recent response (its input and its output items, as
// chat messages — the output translated exactly as a client replaying those items would send them), kept in memory by
// response id. Bounded (least recently used first out);
// it does not survive a gateway restart, and a response created with `store: false` is not kept — a client that
// continues such a response gets OpenAI's "previous response not found" error, as from OpenAI.
// Messages are shared between a response and its successors, so a long conversation costs its messages once.
import { LRUCache } from "lru-cache";
import type { GatewayContext } from "../../context.ts";
import type { Json } from "../../upstream/fields.ts";

const CAPACITY = 4096;
const histories = new WeakMap<GatewayContext, LRUCache<string, readonly Json[]>>();

export function responseHistory(ctx: GatewayContext): LRUCache<string, readonly Json[]> {
  let history = histories.get(ctx);
  if (!history) histories.set(ctx, (history = new LRUCache({ max: CAPACITY })));
  return history;
}
