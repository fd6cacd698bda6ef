// A call record as stored: token arrays packed as int32/float32 bytes, bodies as JSON bytes, and the prompt as a
// reference to an earlier call's sequence plus the tokens that are new.
import type { PromptRef } from "./prompt-index.ts";
import { jsonFromBytes, RawJson, spliceBytes, SplicedJson, type CallRecord, type ChoiceCapture } from "./records.ts";
import { packFloat32, packInt32, unpackFloat32, unpackInt32 } from "./token-codec.ts";

export interface StoredChoice extends Omit<ChoiceCapture, "tokenIds" | "logprobs"> {
  tokenIds: Uint8Array;
  logprobs: Uint8Array | null;
}

export interface StoredCall
  extends Omit<CallRecord, "promptTokenIds" | "choices" | "requestReceived" | "requestForwarded" | "response"> {
  /** prompt = sequence(promptRef)[0, promptRef.length) ++ promptTail; null tail: the upstream reported no prompt. */
  promptRef: PromptRef | null;
  promptTail: Uint8Array | null;
  choices: StoredChoice[];
  // Bodies are stored as JSON bytes: as they travelled when rlgate holds them as bytes, encoded once otherwise.
  requestReceived: Uint8Array;
  /** The forwarded body's bytes, or — when it is the received body with fields spliced in — where and what. */
  requestForwarded: Uint8Array | StoredSplice;
  response: Uint8Array;
}

export interface StoredSplice {
  at: number;
  insert: Uint8Array;
}

function jsonBytes(value: unknown): Uint8Array {
  return value instanceof RawJson || value instanceof SplicedJson ? value.bytes : Buffer.from(JSON.stringify(value ?? null));
}

const NOTHING = new Uint8Array(0);

/** The forwarded body as stored: a splice of the received one when it is one (or the received one itself). */
function forwardedAsStored(call: CallRecord): Uint8Array | StoredSplice {
  const forwarded = call.requestForwarded;
  if (forwarded === call.requestReceived && forwarded instanceof RawJson) return { at: 0, insert: NOTHING };
  if (forwarded instanceof SplicedJson && forwarded.base === call.requestReceived) return { at: forwarded.at, insert: forwarded.insert };
  return jsonBytes(forwarded);
}

export function encodeCall(call: CallRecord, ref: PromptRef | null): StoredCall {
  const { promptTokenIds, ...rest } = call;
  return {
    ...rest,
    requestReceived: jsonBytes(call.requestReceived),
    requestForwarded: forwardedAsStored(call),
    response: jsonBytes(call.response),
    promptRef: ref,
    promptTail: packInt32(promptTokenIds === null ? null : ref ? promptTokenIds.slice(ref.length) : promptTokenIds),
    choices: call.choices.map((c) => ({ ...c, tokenIds: packInt32(c.tokenIds)!, logprobs: packFloat32(c.logprobs) })),
  };
}

function forwardedBytes(stored: StoredCall): Uint8Array {
  const forwarded = stored.requestForwarded;
  if (forwarded instanceof Uint8Array) return forwarded;
  return spliceBytes(stored.requestReceived, forwarded.at, forwarded.insert);
}

/** Resolves prompt references; `lookup` reads another stored call of the same rollout. */
export class CallDecoder {
  readonly #lookup: (seq: number) => StoredCall | undefined;
  readonly #prompts = new Map<number, number[] | null>();

  constructor(lookup: (seq: number) => StoredCall | undefined) {
    this.#lookup = lookup;
  }

  decode(stored: StoredCall): CallRecord {
    const { promptRef: _ref, promptTail: _tail, ...rest } = stored;
    return {
      ...rest,
      requestReceived: jsonFromBytes(stored.requestReceived),
      requestForwarded: jsonFromBytes(forwardedBytes(stored)),
      response: jsonFromBytes(stored.response),
      promptTokenIds: this.prompt(stored),
      choices: stored.choices.map((c) => ({
        ...c,
        tokenIds: unpackInt32(c.tokenIds) ?? [],
        logprobs: unpackFloat32(c.logprobs),
      })),
    };
  }

  /** The full prompt of a stored call; references are followed iteratively (chains can be long). */
  prompt(stored: StoredCall): number[] | null {
    const cached = this.#prompts.get(stored.seq);
    if (cached !== undefined) return cached;
    // Walk back to a call whose prompt is known (or stored whole), then resolve forward.
    const chain: StoredCall[] = [stored];
    for (let call = stored; call.promptRef && !this.#prompts.has(call.promptRef.seq); ) {
      const base = this.#lookup(call.promptRef.seq);
      if (!base) throw new Error(`call ${call.seq} refers to call ${call.promptRef.seq}, which is not in the store`);
      chain.push(base);
      call = base;
    }
    let result: number[] | null = null;
    for (let i = chain.length - 1; i >= 0; i--) {
      const call = chain[i]!;
      const tail = unpackInt32(call.promptTail);
      if (tail === null) {
        result = null;
      } else if (!call.promptRef) {
        result = tail;
      } else {
        const ref = call.promptRef;
        const baseCall = i + 1 < chain.length ? chain[i + 1]! : this.#lookup(ref.seq)!;
        const basePrompt = this.#prompts.get(ref.seq) ?? this.prompt(baseCall) ?? [];
        const choice = baseCall.choices.find((c) => c.index === ref.choice);
        const sequence = basePrompt.concat(unpackInt32(choice?.tokenIds) ?? []);
        result = sequence.slice(0, ref.length).concat(tail);
      }
      this.#prompts.set(call.seq, result);
    }
    return result;
  }
}
