// A call record as stored: token arrays packed as int32/float32 bytes, bodies as JSON bytes, and the prompt as a
// reference to an earlier call's sequence plus the tokens that are new.
import { CallTokensDecoder } from "./call-tokens-decoder.ts";
import type { PromptRef } from "./call-tokens.ts";
import { jsonFromBytes, RawJson, spliceBytes, SplicedJson, type CallRecord, type ChoiceCapture } from "./records.ts";
import { expandStream, foldChunks, streamChunks, type StreamObject } from "./stream-response.ts";
import { BodyReader, type StoredBody } from "./request-bodies.ts";
import { packFloat32, packInt32, storedRouting, toNumbers, unpackFloat32, unpackInt32 } from "./token-codec.ts";

export interface StoredChoice extends Omit<ChoiceCapture, "tokenIds" | "logprobs" | "entropies"> {
  tokenIds: Uint8Array;
  logprobs: Uint8Array | null;
  entropies?: Uint8Array;
}

export interface StoredCall extends Omit<
  CallRecord,
  "promptTokenIds" | "choices" | "requestReceived" | "requestForwarded" | "response"
> {
  /** prompt = sequence(promptRef)[0, promptRef.length) ++ promptTail; null tail: the upstream reported no prompt. */
  promptRef: PromptRef | null;
  promptTail: Uint8Array | null;
  choices: StoredChoice[];
  // Bodies are stored as JSON bytes: as they travelled when rlgate holds them as bytes, encoded once otherwise.
  /** The received body's bytes, or the start of an earlier call's and its own rest (request-bodies.ts). */
  requestReceived: StoredBody;
  /** The forwarded body's bytes, or — when it is the received body with fields spliced in — where and what. */
  requestForwarded: Uint8Array | StoredSplice;
  /** JSON bytes (a StoredStream only in records read from stores that kept streams as their events). */
  response: Uint8Array | StoredStream;
}

/** The earlier calls of its rollout a stored call cannot be read without: its prompt's and its body's references. */
export function referredCalls(stored: StoredCall): number[] {
  const out: number[] = [];
  if (stored.promptRef) out.push(stored.promptRef.seq);
  if (!(stored.requestReceived instanceof Uint8Array)) out.push(stored.requestReceived.seq);
  return out;
}

/**
 * A streamed response kept as the events the harness received (the token fields spliced to null), as some stores
 * hold them: read, never written (every response is stored as JSON: a stream's events cost ~100 bytes a token and
 * more CPU to commit than the whole response costs to build).
 */
export interface StoredStream {
  /** The events; with a `head`, each event that starts with a NUL byte starts with `head` instead. */
  sse: Uint8Array;
  object: StreamObject;
  head?: Uint8Array;
}

export interface StoredSplice {
  at: number;
  insert: Uint8Array;
}

/** A stored response's value (JSON bytes; a stored stream folded into its whole response). */
export function storedResponse(response: Uint8Array | StoredStream): unknown {
  if (response instanceof Uint8Array) return jsonFromBytes(response);
  const sse = response.head ? expandStream(response.sse, response.head) : response.sse;
  return foldChunks(streamChunks(sse), response.object);
}

function jsonBytes(value: unknown): Uint8Array {
  return value instanceof RawJson || value instanceof SplicedJson
    ? value.bytes
    : Buffer.from(JSON.stringify(value ?? null));
}

const NOTHING = new Uint8Array(0);

/** The forwarded body as stored: a splice of the received one when it is one (or the received one itself). */
function forwardedAsStored(call: CallRecord): Uint8Array | StoredSplice {
  const forwarded = call.requestForwarded;
  if (forwarded === call.requestReceived && forwarded instanceof RawJson) return { at: 0, insert: NOTHING };
  if (forwarded instanceof SplicedJson && forwarded.base === call.requestReceived)
    return { at: forwarded.at, insert: forwarded.insert };
  return jsonBytes(forwarded);
}

/**
 * `value`'s own fields but `skip`, in their order (fields set afterwards keep their place). A copy by keys: object rest
 * and spread of a call record measured ~2.5x slower (~3.6 against ~1.4 µs), once per call on the gateway's thread.
 */
function fieldsBut<T extends object>(value: T, skip: string): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const key in value) if (key !== skip && Object.hasOwn(value, key)) copy[key] = value[key];
  return copy;
}

function storedChoice(choice: ChoiceCapture): StoredChoice {
  const stored = fieldsBut(choice, "entropies");
  stored["tokenIds"] = packInt32(choice.tokenIds)!;
  stored["logprobs"] = packFloat32(choice.logprobs);
  if (choice.entropies) stored["entropies"] = packFloat32(choice.entropies)!;
  return stored as unknown as StoredChoice;
}

/** The received body's bytes, as they are stored when not against an earlier call's. */
export function receivedBytes(call: CallRecord): Uint8Array {
  return jsonBytes(call.requestReceived);
}

/** `received`: how the received body is stored (its bytes, or against an earlier call's: request-bodies.ts). */
export function encodeCall(
  call: CallRecord,
  ref: PromptRef | null,
  received: StoredBody = receivedBytes(call),
): StoredCall {
  const promptTokenIds = call.promptTokenIds;
  const stored = fieldsBut(call, "promptTokenIds");
  stored["requestReceived"] = received;
  stored["requestForwarded"] = forwardedAsStored(call);
  stored["response"] = jsonBytes(call.response);
  stored["promptRef"] = ref;
  stored["promptTail"] = packInt32(
    promptTokenIds === null ? null : ref ? promptTokenIds.slice(ref.length) : promptTokenIds,
  );
  stored["choices"] = call.choices.map(storedChoice);
  return stored as unknown as StoredCall;
}

function forwardedBytes(stored: StoredCall, received: Uint8Array): Uint8Array {
  const forwarded = stored.requestForwarded;
  if (forwarded instanceof Uint8Array) return forwarded;
  return spliceBytes(received, forwarded.at, forwarded.insert);
}

/** Decodes stored calls of one rollout; `lookup` reads another stored call of it (for prompt references). */
export class CallDecoder {
  readonly #tokens: CallTokensDecoder;
  readonly #bodies: BodyReader;
  readonly #bodiesWhenRead: boolean;

  /**
   * `tokens`: a decoder that already holds calls of this rollout (their prompts are not decoded again).
   * `bodiesWhenRead`: the request bodies are resolved and parsed only if read — for records only some fields of which
   * are wanted (catching up on other workers' calls: an agent's 50 kB body, perhaps behind references, parsed twice).
   */
  constructor(
    lookup: (seq: number) => StoredCall | undefined,
    tokens = new CallTokensDecoder(lookup),
    { bodiesWhenRead = false } = {},
  ) {
    this.#tokens = tokens;
    this.#bodies = new BodyReader((seq) => lookup(seq)?.requestReceived);
    this.#bodiesWhenRead = bodiesWhenRead;
  }

  decode(stored: StoredCall): CallRecord {
    const { promptRef: _ref, promptTail: _tail, ...rest } = stored;
    const prompt = this.#tokens.prompt(stored);
    let received: Uint8Array | undefined;
    const receivedBytes = () => (received ??= this.#bodies.bytes(stored.seq, stored.requestReceived));
    const record: CallRecord = {
      ...rest,
      requestReceived: this.#bodiesWhenRead ? null : jsonFromBytes(receivedBytes()),
      requestForwarded: this.#bodiesWhenRead ? null : jsonFromBytes(forwardedBytes(stored, receivedBytes())),
      response: storedResponse(stored.response),
      promptTokenIds: prompt ? toNumbers(prompt) : null,
      choices: stored.choices.map(({ entropies, ...c }) => ({
        ...c,
        tokenIds: unpackInt32(c.tokenIds) ?? [],
        logprobs: unpackFloat32(c.logprobs),
        ...(entropies ? { entropies: unpackFloat32(entropies)! } : {}),
        ...(c.routing ? { routing: storedRouting(c.routing) } : {}),
      })),
    };
    if (this.#bodiesWhenRead) {
      whenRead(record, "requestReceived", () => jsonFromBytes(receivedBytes()));
      whenRead(record, "requestForwarded", () => jsonFromBytes(forwardedBytes(stored, receivedBytes())));
    }
    return record;
  }
}

/** Makes `key` of `target` (which holds it already: its place among the keys is kept) computed the first time it is read. */
function whenRead<T extends object>(target: T, key: keyof T & string, compute: () => unknown): void {
  const settle = (value: unknown) =>
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  Object.defineProperty(target, key, {
    enumerable: true,
    configurable: true,
    get() {
      const value = compute();
      settle(value);
      return value;
    },
    set: settle,
  });
}
