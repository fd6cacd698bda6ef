// Where each new prompt's tokens were already stored. A harness re-sends its whole history on every call, so a prompt
// is stored as a reference to the longest stored prefix (an earlier call's prompt + completion) plus its new tokens:
// a rollout's stored token bytes grow with its unique tokens, not with the sum of its prompts.
// One prefix tree per open rollout, in memory (12 bytes a unique token), rebuilt from the store after a restart.
import { LRUCache } from "lru-cache";
import type { CallTokens, PromptRef, PromptRefIndex } from "../store/call-tokens.ts";
import type { CallRecord } from "../store/records.ts";
import { fromCallRecord } from "./call-tokens.ts";
import { RolloutTree } from "./rollout-tree.ts";

export class PromptIndex implements PromptRefIndex {
  readonly #trees: LRUCache<string, RolloutTree>;

  constructor(capacity = 256) {
    this.#trees = new LRUCache({ max: capacity });
  }

  has(rolloutId: string): boolean {
    return this.#trees.has(rolloutId);
  }

  rebuild(rolloutId: string, calls: readonly CallTokens[]): void {
    const tree = new RolloutTree();
    for (const call of calls) tree.add(call);
    this.#trees.set(rolloutId, tree);
  }

  admit(rolloutId: string, call: CallRecord): PromptRef | null {
    let tree = this.#trees.get(rolloutId);
    if (!tree) this.#trees.set(rolloutId, (tree = new RolloutTree()));
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
}
