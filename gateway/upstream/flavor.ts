// The one place that picks how rlgate talks to its inference server. An upstream flavour knows, for each API the
// upstream speaks natively (chat completions, completions), what to add to a request so the response carries token
// ids and logprobs, where to read them back, and how to give the harness the response it would have had directly.
import type { ChoiceCapture } from "../../store/records.ts";
import type { Json } from "./fields.ts";
import type { RecentIdLists } from "./id-list.ts";
import type { RoutedPayload, RoutingAsk } from "./routed-experts.ts";
import { sglangFlavor } from "./sglang.ts";
import { vllmFlavor } from "./vllm.ts";

export const FLAVOR_NAMES = ["vllm", "sglang"] as const;
export type FlavorName = (typeof FLAVOR_NAMES)[number];

/** Which of the fields rlgate adds the harness asked for itself (those are left in what it receives). */
export interface HarnessWants {
  promptTokenIds: boolean;
  tokenIds: boolean;
  logprobs: boolean;
  /** Routed experts: absent or true where the harness gets them as the upstream sends them. */
  routedExperts?: boolean;
  /** The capture reads the top alternatives rlgate asked for (gateway/branching/entropy.ts): chunks parsed whole. */
  topEntries?: boolean;
}

export interface PreparedRequest {
  /** The body sent upstream. */
  forwarded: Json;
  wants: HarnessWants;
  /**
   * Whether the upstream request streams. False for a streamed call the upstream cannot stream with token ids
   * (a chat call to SGLang): rlgate asks for the whole response and re-emits it to the harness as a stream.
   */
  upstreamStream: boolean;
}

export interface Captured {
  promptTokenIds: number[] | null;
  choices: ChoiceCapture[];
  /** Routed-experts payloads the response carried (read into the record when `serve --routed-experts`). */
  routedExperts?: RoutedPayload[];
}

/** Collects token ids and logprobs from a stream's chunks and assembles the equivalent whole response. */
export interface StreamAssembler {
  /**
   * Adds one parsed chunk; true when it carried sampled tokens or text (for time-to-first-token). `scanned`: the chunk
   * came from a codec's `scanChunk`, whose layout holds no routed experts (their look-up is skipped).
   */
  add(chunk: Json, scanned?: boolean): boolean;
  readonly promptTokenIds: number[] | null;
  /** Routed-experts payloads the chunks carried (SGLang: a chunk without choices after the finish). */
  readonly routedExperts: RoutedPayload[];
  captures(): ChoiceCapture[];
  /** The whole response the chunks stand for (what a streamed call's record keeps), folded when asked for. */
  assembled(): Json;
}

/** How one native API carries token ids on one upstream. */
export interface ApiCodec {
  /**
   * `routing`: ask for routed experts (`serve --routed-experts`). vLLM sends them only on whole responses (the server
   * flag does it), so a streamed call then goes upstream unstreamed and is re-emitted; SGLang is asked per request.
   */
  prepare(body: Json, harnessStream: boolean, routing?: RoutingAsk | null): PreparedRequest;
  captureWhole(response: Json): Captured;
  /** Removes from a whole response what the harness did not ask for. */
  stripWhole(response: Json, wants: HarnessWants): void;
  /**
   * `entropies`: read each token's entropy from the top alternatives chunks carry (default true); false where a
   * scanned chunk (entries reduced) and a parsed one must capture alike.
   */
  newAssembler(options?: { entropies?: boolean }): StreamAssembler;
  /**
   * The text of one streamed chunk as the harness receives it: `data` (the upstream's text of `chunk`, which was parsed
   * from it) without what the harness did not ask for; null when the harness would not have received the chunk at all.
   * `chunk` may be changed.
   */
  harnessChunk(data: string, chunk: Json, wants: HarnessWants): string | null;
  /**
   * A streamed chunk's text read without JSON.parse, or null to parse it: `chunk` equals the parsed chunk but for what
   * neither capture nor `harnessChunk` reads given `wants`, `harnessText` is what `harnessChunk` gives. Any text the
   * scan does not know exactly is declined.
   */
  scanChunk?(
    data: string,
    wants: HarnessWants,
    recent?: RecentIdLists | null,
  ): { chunk: Json; harnessText: string | null } | null;
  /**
   * A whole 200 response's text parsed for capture faster than JSON.parse, or null to parse it: it equals the parsed
   * response but for what neither capture nor `stripWhole` reads given `wants`.
   */
  parseWhole?(text: string, wants: HarnessWants, recent?: RecentIdLists | null): Json | null;
  /** The chunks a stream of this whole response holds (used when the upstream was asked not to stream). */
  reemit?(response: Json, harnessRequest: Json): Json[];
}

export interface UpstreamFlavor {
  readonly name: FlavorName;
  readonly chat: ApiCodec;
  readonly completions: ApiCodec;
}

const FLAVORS: Record<FlavorName, UpstreamFlavor> = { vllm: vllmFlavor, sglang: sglangFlavor };

export function selectUpstreamFlavor(name: FlavorName = "vllm"): UpstreamFlavor {
  const flavor = Object.hasOwn(FLAVORS, name) ? FLAVORS[name] : undefined;
  if (!flavor)
    throw new Error(`unknown upstream flavor '${String(name)}' (expected one of ${FLAVOR_NAMES.join(", ")})`);
  return flavor;
}

/** True when nothing rlgate added must be removed: the upstream's bytes can be forwarded as they are. */
export function wantsEverything(wants: HarnessWants): boolean {
  return wants.promptTokenIds && wants.tokenIds && wants.logprobs && wants.routedExperts !== false;
}
