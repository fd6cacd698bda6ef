// Routed experts (MoE routing replay, `serve --routed-experts`) in upstream bodies: where each server puts them, how a
// call's are read into its record, and how they are kept out of what is stored or relayed where they do not belong.
// vLLM: `choices[].routed_experts` (base64 .npy, every position but the last, on non-streamed responses only).
// SGLang: `sglext.routed_experts` at response level, for the first choice (older releases: `choices[].sgl_ext`), base64
// int32 from `routed_experts_start_len` to seqlen − 1; streams carry it in a chunk without choices after the finish.
import type { ChoiceCapture } from "../../store/records.ts";
import { readInt32Routing, readNpyRouting, RoutingError, type Routing } from "../../util/routed-experts.ts";
import { choicesOf, isObject, type Json } from "./fields.ts";

/** One routed-experts payload as the upstream sent it. */
export interface RoutedPayload {
  /** The choice it belongs to (index); null: response level (SGLang's sglext: the first choice). */
  choice: number | null;
  /** `npy`: vLLM's base64 .npy; `int32`: SGLang's base64 raw int32. */
  format: "npy" | "int32";
  data: string;
}

/** `serve --routed-experts`: what the gateway needs to read SGLang's payloads (top_k) and to narrow them (experts). */
export interface RoutedExpertsSetting {
  /** Experts per token and layer (`--moe-top-k`): SGLang's int32 payload does not carry its shape. */
  topK: number | null;
  /** Experts per layer (`--moe-experts`): uint8 when ≤ 256, else uint16; unknown: from the values. */
  experts: number | null;
}

/** What was asked of the upstream for one call. */
export interface RoutingAsk {
  /** Positions of the prompt whose routing the rollout already holds (SGLang's routed_experts_start_len). */
  startLen: number;
}

const EXT_KEYS = ["sglext", "sgl_ext"] as const;

function extPayload(holder: Json): string | null {
  for (const key of EXT_KEYS) {
    const ext = holder[key];
    if (isObject(ext) && typeof ext["routed_experts"] === "string") return ext["routed_experts"];
  }
  return null;
}

/** The routed-experts payloads of a whole response or of one stream chunk. */
export function routedPayloads(body: Json): RoutedPayload[] {
  const out: RoutedPayload[] = [];
  const top = extPayload(body);
  if (top !== null) out.push({ choice: null, format: "int32", data: top });
  choicesOf(body).forEach((choice, position) => {
    const index = typeof choice["index"] === "number" ? choice["index"] : position;
    if (typeof choice["routed_experts"] === "string")
      out.push({ choice: index, format: "npy", data: choice["routed_experts"] });
    const ext = extPayload(choice);
    if (ext !== null) out.push({ choice: index, format: "int32", data: ext });
  });
  return out;
}

function dropExt(holder: Json): boolean {
  let dropped = false;
  for (const key of EXT_KEYS) {
    const ext = holder[key];
    if (!isObject(ext) || !("routed_experts" in ext)) continue;
    dropped = true;
    const { routed_experts: _gone, ...rest } = ext;
    if (Object.keys(rest).length === 0) delete holder[key];
    else holder[key] = rest;
  }
  return dropped;
}

/** Removes every routed-experts payload from a body (in place); true when there was one. */
export function stripRouting(body: Json): boolean {
  let dropped = dropExt(body);
  for (const choice of choicesOf(body)) {
    if ("routed_experts" in choice) {
      delete choice["routed_experts"];
      dropped = true;
    }
    if (dropExt(choice)) dropped = true;
  }
  return dropped;
}

/** True for a stream chunk that only carried SGLang's routing (no choices, nothing else once it is removed). */
export function isRoutingOnlyChunk(chunk: Json): boolean {
  const choices = chunk["choices"];
  return Array.isArray(choices) && choices.length === 0 && chunk["usage"] == null && extPayload(chunk) !== null;
}

/**
 * Turns a call's payloads into the routing kept on its choices, or the reason it cannot be kept. Never throws: a
 * malformed payload becomes the call's `routingIssue`.
 */
export function captureRouting(
  payloads: readonly RoutedPayload[],
  promptTokenIds: readonly number[] | null,
  choices: ChoiceCapture[],
  ask: RoutingAsk,
  setting: RoutedExpertsSetting,
): string | null {
  if (promptTokenIds === null || choices.length === 0) return null; // nothing to align with (flagged for its ids)
  if (payloads.length === 0)
    return "the upstream sent no routed experts (is it started with --enable-return-routed-experts?)";
  const issues: string[] = [];
  const sorted = [...choices].sort((a, b) => a.index - b.index);
  for (const payload of payloads) {
    const choice = payload.choice === null ? sorted[0] : choices.find((c) => c.index === payload.choice);
    if (!choice) {
      issues.push(`routed experts for choice ${payload.choice}, which the response does not have`);
      continue;
    }
    const seqLength = promptTokenIds.length + choice.tokenIds.length;
    try {
      let routing: Routing;
      if (payload.format === "npy") {
        routing = readNpyRouting(payload.data, setting.experts);
        if (routing.rows !== seqLength - 1)
          throw new RoutingError(
            `${routing.rows} rows of routed experts for ${promptTokenIds.length} prompt + ${choice.tokenIds.length} sampled tokens (expected ${seqLength - 1})`,
          );
      } else {
        if (setting.topK === null)
          throw new RoutingError("SGLang's routed experts do not carry their shape: start serve with --moe-top-k K");
        const rows = seqLength - 1 - ask.startLen;
        routing = readInt32Routing(payload.data, { start: ask.startLen, rows, topK: setting.topK }, setting.experts);
      }
      choice.routing = routing;
    } catch (error) {
      // A RoutingError says what is wrong; anything else is a payload no check foresaw: kept out just the same.
      const message = error instanceof RoutingError ? error.message : `unreadable payload (${String(error)})`;
      issues.push(`choice ${choice.index}: ${message}`);
    }
  }
  return issues.length === 0 ? null : issues.join("; ");
}
