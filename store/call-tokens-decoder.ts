// Decodes what trajectory reconstruction needs of a rollout's stored calls (prompts, sampled ids, logprobs), without
// their bodies and without giving each call its own copy of its prompt.
//
// Why: a harness re-sends its whole history, so a rollout's prompts are mostly prefixes of one another. Rebuilt one by
// one as arrays they cost the sum of every prompt: 100 turns of a session growing to 95k tokens is ~5M ids, ~0.5 s of
// allocation on the gateway's event loop at each finish, each delivery to an RL core and each prompt-index rebuild.
// The stored prompt references already say how prompts share: prompt = a prefix of an earlier call's sequence
// (prompt ++ sampled ids) ++ new tokens. Here every sequence is a view into a buffer that holds it once: a sequence
// that continues the one it refers to is written after it in place, a prompt that is a prefix of its reference is a
// view of it, and only a prompt that leaves its reference part-way and adds tokens is copied. Memory and time then
// follow the rollout's unique tokens (what the prefix tree holds), not the sum of its prompts. `CallDecoder` (whole
// call records, for the API) takes its prompts from here too, copying each once into its array.
import type { CallTokens, ChoiceTokens } from "./call-tokens.ts";
import type { StoredCall } from "./call-codec.ts";
import { float32Copy, int32Copy, storedRouting } from "./token-codec.ts";

/** A buffer that sequences are written into; `top` is its first free slot. */
interface Chunk {
  ids: Int32Array;
  top: number;
}

/** A sequence of ids: [start, end) of a chunk. */
interface Run {
  chunk: Chunk;
  start: number;
  end: number;
}

/** Ids in a new buffer at least (16 KiB): small enough for decoding one call, buffers grow by doubling. */
const MIN_CHUNK = 1 << 12;
const EMPTY_RUN: Run = { chunk: { ids: new Int32Array(0), top: 0 }, start: 0, end: 0 };

export class CallTokensDecoder {
  readonly #lookup: (seq: number) => StoredCall | undefined;
  /** Each decoded call's prompt (null: the upstream reported none). */
  readonly #prompts = new Map<number, Run | null>();
  /** Sequences (prompt ++ sampled ids of one choice) that a later prompt referred to, by `${seq}:${choice}`. */
  readonly #sequences = new Map<string, Run>();
  #current: Chunk = { ids: new Int32Array(0), top: 0 };

  /** `lookup` reads another stored call of the same rollout (a prompt may refer to a call not decoded yet). */
  constructor(lookup: (seq: number) => StoredCall | undefined) {
    this.#lookup = lookup;
  }

  decode(stored: StoredCall): CallTokens {
    const prompt = this.prompt(stored);
    const choices: ChoiceTokens[] = stored.choices.map((c) => ({
      index: c.index,
      tokenIds: int32Copy(c.tokenIds),
      logprobs: c.logprobs ? float32Copy(c.logprobs) : null,
      finishReason: c.finishReason,
      ...(c.routing ? { routing: storedRouting(c.routing) } : {}),
    }));
    return {
      callSeq: stored.seq,
      promptIds: prompt,
      choices,
      tokenSource: stored.tokenSource,
      tokenIssue: stored.tokenIssue ?? null,
      status: stored.status,
      startedAt: stored.timings.start,
      tools: stored.tools ?? null,
      policyVersion: stored.policyVersion ?? null,
      policyVersions: stored.policyUpdate?.versions ?? null,
      sampling: stored.sampling ?? null,
      routingIssue: stored.routingIssue ?? null,
    };
  }

  /** A stored call's prompt, as a view of memory it may share with other prompts of the rollout (never written to). */
  prompt(stored: StoredCall): Int32Array | null {
    const run = this.#promptRun(stored);
    return run ? run.chunk.ids.subarray(run.start, run.end) : null;
  }

  /** References are followed iteratively (chains of not-yet-decoded calls can be long). */
  #promptRun(stored: StoredCall): Run | null {
    const known = this.#prompts.get(stored.seq);
    if (known !== undefined) return known;
    const chain: StoredCall[] = [stored];
    for (let call = stored; call.promptRef && !this.#prompts.has(call.promptRef.seq);) {
      const base = this.#lookup(call.promptRef.seq);
      if (!base) throw new Error(`call ${call.seq} refers to call ${call.promptRef.seq}, which is not in the store`);
      chain.push(base);
      call = base;
    }
    let result: Run | null = null;
    for (let i = chain.length - 1; i >= 0; i--) {
      const call = chain[i]!;
      const ref = call.promptRef;
      if (call.promptTail === null) result = null;
      else if (!ref) result = this.#append(EMPTY_RUN, int32Copy(call.promptTail));
      else {
        const baseCall = i + 1 < chain.length ? chain[i + 1]! : this.#lookup(ref.seq)!;
        const sequence = this.#sequence(baseCall, ref.choice);
        const prefix = Math.min(ref.length, sequence.end - sequence.start);
        result = this.#append({ ...sequence, end: sequence.start + prefix }, int32Copy(call.promptTail));
      }
      this.#prompts.set(call.seq, result);
    }
    return result;
  }

  /** prompt ++ sampled ids of one choice of a call whose prompt is decoded (a missing prompt or choice adds nothing). */
  #sequence(call: StoredCall, choiceIndex: number): Run {
    const key = `${call.seq}:${choiceIndex}`;
    let run = this.#sequences.get(key);
    if (!run) {
      const choice = call.choices.find((c) => c.index === choiceIndex);
      run = this.#append(
        this.#prompts.get(call.seq) ?? EMPTY_RUN,
        choice ? int32Copy(choice.tokenIds) : new Int32Array(0),
      );
      this.#sequences.set(key, run);
    }
    return run;
  }

  /** `run ++ ids`: written in place after the run when nothing follows it in its chunk, else copied to a new place. */
  #append(run: Run, ids: Int32Array): Run {
    if (ids.length === 0) return run;
    const { chunk } = run;
    if (run.end === chunk.top && run.end > run.start && chunk.top + ids.length <= chunk.ids.length) {
      chunk.ids.set(ids, chunk.top);
      chunk.top += ids.length;
      return { chunk, start: run.start, end: chunk.top };
    }
    const length = run.end - run.start + ids.length;
    let target = this.#current;
    if (target.top + length > target.ids.length) {
      // Room to grow: a sequence that keeps being continued is moved at most once per doubling.
      target = { ids: new Int32Array(Math.max(MIN_CHUNK, 2 * length)), top: 0 };
      this.#current = target;
    }
    const start = target.top;
    target.ids.set(chunk.ids.subarray(run.start, run.end), start);
    target.ids.set(ids, start + run.end - run.start);
    target.top = start + length;
    return { chunk: target, start, end: target.top };
  }
}
