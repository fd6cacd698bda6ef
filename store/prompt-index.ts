// Where each new prompt's tokens were already stored. A harness re-sends its whole history on every call, so a prompt
// is stored as a reference to the longest stored prefix (an earlier call's prompt + completion) plus its new tokens:
// a rollout's stored token bytes grow with its unique tokens, not with the sum of its prompts.
// One prefix tree per open rollout, in memory (12 bytes a unique token), rebuilt from the store after a restart.
import { fromCallRecord, RolloutTree, type CallTokens } from "../trajectory/index.ts";
import type { CallRecord } from "./records.ts";

export interface PromptRef {
  /** The earlier call whose sequence (prompt ++ sampled ids of `choice`) starts with this prompt's first `length` ids. */
  seq: number;
  choice: number;
  length: number;
}

export class PromptIndex {
  readonly #trees = new Map<string, RolloutTree>();
  readonly #capacity: number;

  constructor(capacity = 256) {
    this.#capacity = capacity;
  }

  has(rolloutId: string): boolean {
    return this.#trees.has(rolloutId);
  }

  /** Installs a tree rebuilt from a rollout's stored calls (after a restart or an eviction), given in call order. */
  rebuild(rolloutId: string, calls: readonly CallTokens[]): void {
    const tree = new RolloutTree();
    for (const call of calls) tree.add(call);
    this.#install(rolloutId, tree);
  }

  /** Finds the storage reference for a call's prompt and adds the call to its rollout's tree. */
  admit(rolloutId: string, call: CallRecord): PromptRef | null {
    let tree = this.#trees.get(rolloutId);
    if (!tree) {
      tree = new RolloutTree();
      this.#install(rolloutId, tree);
    } else {
      // Most recently used last.
      this.#trees.delete(rolloutId);
      this.#trees.set(rolloutId, tree);
    }
    let ref: PromptRef | null = null;
    if (call.promptTokenIds && call.promptTokenIds.length > 0) {
      const found = tree.locate(call.promptTokenIds);
      if (found.ref && found.matchedTokens > 0) {
        ref = { seq: found.ref.callSeq, choice: found.ref.choiceIndex, length: found.matchedTokens };
      }
    }
    tree.add(fromCallRecord(call));
    return ref;
  }

  /** A finished rollout takes no more calls (late ones are stored whole). */
  forget(rolloutId: string): void {
    this.#trees.delete(rolloutId);
  }

  #install(rolloutId: string, tree: RolloutTree): void {
    this.#trees.set(rolloutId, tree);
    while (this.#trees.size > this.#capacity) {
      const oldest = this.#trees.keys().next().value as string;
      this.#trees.delete(oldest);
    }
  }
}
