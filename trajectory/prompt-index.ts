// Where each new prompt's tokens were already stored. A harness re-sends its whole history on every call, so a prompt
// is stored as a reference to the longest stored prefix (an earlier call's prompt + completion) plus its new tokens:
// a rollout's stored token bytes grow with its unique tokens, not with the sum of its prompts.
// One prefix tree per open rollout, in memory (12 bytes a unique token), rebuilt from the store after a restart.
import { LRUCache } from "lru-cache";
import type { CallTokens, PromptRef, PromptRefIndex, SeenCalls } from "../store/call-tokens.ts";
import type { CallRecord } from "../store/records.ts";
import { fromCallRecord } from "./call-tokens.ts";
import { RolloutTree } from "./rollout-tree.ts";

/** A rollout's tree and the calls in it. */
interface Indexed {
  tree: RolloutTree;
  seen: SeenCalls;
}

export class PromptIndex implements PromptRefIndex {
  readonly #trees: LRUCache<string, Indexed>;

  constructor(capacity = 256) {
    this.#trees = new LRUCache({ max: capacity });
  }

  has(rolloutId: string): boolean {
    return this.#trees.has(rolloutId);
  }

  seen(rolloutId: string): SeenCalls | undefined {
    return this.#trees.get(rolloutId)?.seen;
  }

  rebuild(rolloutId: string, calls: readonly CallTokens[], mark: number): void {
    const indexed: Indexed = { tree: new RolloutTree(), seen: { seqs: new Set(), mark } };
    this.#trees.set(rolloutId, indexed);
    this.extend(rolloutId, calls);
  }

  extend(rolloutId: string, calls: readonly CallTokens[]): void {
    const indexed = this.#trees.get(rolloutId);
    if (!indexed) return;
    for (const call of calls) {
      if (indexed.seen.seqs.has(call.callSeq)) continue;
      indexed.tree.add(call);
      indexed.seen.seqs.add(call.callSeq);
    }
  }

  admit(rolloutId: string, call: CallRecord): PromptRef | null {
    let indexed = this.#trees.get(rolloutId);
    if (!indexed)
      this.#trees.set(rolloutId, (indexed = { tree: new RolloutTree(), seen: { seqs: new Set(), mark: 0 } }));
    const tree = indexed.tree;
    indexed.seen.seqs.add(call.seq);
    // A prompt that matched no stored token (none at all, too) has no reference.
    const { located } = tree.addLocated(fromCallRecord(call));
    if (located.ref === null) return null;
    return { seq: located.ref.callSeq, choice: located.ref.choiceIndex, length: located.matchedTokens };
  }

  routedPrefix(rolloutId: string, ids: ArrayLike<number>): number {
    return this.#trees.get(rolloutId)?.tree.routedPrefix(ids) ?? 0;
  }

  /** A finished rollout takes no more calls (late ones are stored whole). */
  forget(rolloutId: string): void {
    this.#trees.delete(rolloutId);
  }
}
