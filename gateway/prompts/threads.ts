// Agent threads of token-mode rollouts: for every completed call, the exact ids its prompt and each sampled choice
// ended with, found by the key of "its messages + that answer". Ids are held as a tree of tails (a continuing call
// stores only what it added), so memory grows with a rollout's unique tokens. Kept in memory for recent rollouts and
// rebuilt from the store's call records when a rollout is not there (after a restart, or evicted).
import { LRUCache } from "lru-cache";
import { splitKeys, type MessageChain } from "./message-keys.ts";
import type { CallRecord } from "../../store/records.ts";
import type { SeenCalls } from "../../store/call-tokens.ts";
import type { Store } from "../../store/store.ts";

export interface ThreadNode {
  readonly parent: ThreadNode | null;
  /** The ids after the parent's. */
  readonly tail: readonly number[];
  /** All ids up to and including this node's tail. */
  readonly length: number;
  /** The call that produced it, its choice (-1: the prompt), and the thread it belongs to. */
  readonly seq: number;
  readonly choice: number;
  readonly thread: number;
}

/** The ids from the root to this node. */
export function idsOf(node: ThreadNode): number[] {
  const parts: (readonly number[])[] = [];
  for (let n: ThreadNode | null = node; n; n = n.parent) parts.push(n.tail);
  const ids = new Array<number>(node.length);
  let at = 0;
  for (let i = parts.length - 1; i >= 0; i--) {
    const tail = parts[i]!;
    for (let j = 0; j < tail.length; j++) ids[at++] = tail[j]!;
  }
  return ids;
}

/** What a completed token-mode call leaves for later calls to continue. */
export interface CompletedCall {
  seq: number;
  thread: number;
  /** The node its prompt continued (null: a new thread). */
  parent: ThreadNode | null;
  promptIds: readonly number[];
  /** Per choice: its sampled ids and the key a continuing call's messages match. */
  choices: ReadonlyArray<{ tokenIds: readonly number[]; key: string }>;
  /** Its last message's ids, [start, end) in the prompt, and per choice the key of the messages without it + answer. */
  trailing?: { start: number; end: number; keys: readonly string[] } | null;
}

/** A choice whose prompt ends with a context message a harness may move behind the answer. */
interface MovedEntry {
  node: ThreadNode;
  start: number;
  end: number;
  /** The choice's ids without that message, built when a call first continues there. */
  moved?: ThreadNode;
}

/**
 * The ids of `entry.node` without its prompt's [start, end): the thread a call continues when the harness dropped that
 * message and sent the answer after what came before it. Hung under the deepest node that ends before `start`, so
 * only the ids after it are held again.
 */
function movedNode(entry: MovedEntry): ThreadNode {
  if (entry.moved) return entry.moved;
  const { node, start, end } = entry;
  const ids = idsOf(node);
  let base: ThreadNode | null = node.parent;
  while (base !== null && base.length > start) base = base.parent;
  const from = base?.length ?? 0;
  const tail = [...ids.slice(from, start), ...ids.slice(end)];
  entry.moved = {
    parent: base,
    tail,
    length: from + tail.length,
    seq: node.seq,
    choice: node.choice,
    thread: node.thread,
  };
  return entry.moved;
}

export class RolloutThreads {
  readonly #byKey = new Map<string, ThreadNode>();
  readonly #bySeq = new Map<string, ThreadNode>();
  readonly #byMovedKey = new Map<string, MovedEntry>();
  readonly #movedBySeq = new Map<string, MovedEntry>();
  /** Every call looked at (those that left nothing to continue too), and how far the commit log was read. */
  readonly seen: SeenCalls = { seqs: new Set(), mark: 0 };

  /** Whether any call was remembered. */
  get empty(): boolean {
    return this.#byKey.size === 0;
  }

  /** The answer the first k messages of `chain` end with: strictly the same, or else the same by tool-call ids. */
  find(chain: MessageChain, k: number): ThreadNode | undefined {
    return this.#byKey.get(chain.at(k)) ?? this.#byKey.get(chain.looseAt(k));
  }

  /**
   * The answer the first k messages of `chain` end with, where they are an earlier call's messages without its last
   * one (a context message the harness moved behind the answer): that call's ids without the message.
   */
  findMoved(chain: MessageChain, k: number): ThreadNode | undefined {
    const entry = this.#byMovedKey.get(chain.at(k)) ?? this.#byMovedKey.get(chain.looseAt(k));
    return entry && movedNode(entry);
  }

  node(seq: number, choice: number): ThreadNode | undefined {
    return this.#bySeq.get(`${seq}:${choice}`);
  }

  /** A choice's ids without its prompt's trailing context message, when it has one. */
  movedNode(seq: number, choice: number): ThreadNode | undefined {
    const entry = this.#movedBySeq.get(`${seq}:${choice}`);
    return entry && movedNode(entry);
  }

  add(call: CompletedCall): void {
    this.seen.seqs.add(call.seq);
    const base = call.parent?.length ?? 0;
    const prompt: ThreadNode = {
      parent: call.parent,
      tail: base ? call.promptIds.slice(base) : call.promptIds,
      length: call.promptIds.length,
      seq: call.seq,
      choice: -1,
      thread: call.thread,
    };
    call.choices.forEach((choice, index) => {
      const node: ThreadNode = {
        parent: prompt,
        tail: choice.tokenIds,
        length: prompt.length + choice.tokenIds.length,
        seq: call.seq,
        choice: index,
        thread: call.thread,
      };
      const { strict, loose } = splitKeys(choice.key);
      this.#byKey.set(strict, node);
      if (loose !== null) this.#byKey.set(loose, node);
      this.#bySeq.set(`${call.seq}:${index}`, node);
      const trailing = call.trailing;
      const movedKey = trailing?.keys[index];
      if (!trailing || !movedKey) return;
      const entry: MovedEntry = { node, start: trailing.start, end: trailing.end };
      const keys = splitKeys(movedKey);
      this.#byMovedKey.set(keys.strict, entry);
      if (keys.loose !== null) this.#byMovedKey.set(keys.loose, entry);
      this.#movedBySeq.set(`${call.seq}:${index}`, entry);
    });
  }
}

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  if (ids.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false;
  return true;
}

/** Adds a stored call to a rollout's threads, when it is a token-mode call that completed. */
function addRecord(threads: RolloutThreads, call: CallRecord): void {
  if (threads.seen.seqs.has(call.seq)) return;
  threads.seen.seqs.add(call.seq);
  const prompt = call.prompt;
  if (prompt?.mode !== "tokens" || call.status !== "ok" || !call.promptTokenIds || !prompt.continuation) return;
  const from = prompt.parent;
  let parent = from
    ? ((prompt.movedContext ? threads.movedNode(from.seq, from.choice) : threads.node(from.seq, from.choice)) ?? null)
    : null;
  if (parent && !startsWith(call.promptTokenIds, idsOf(parent))) parent = null;
  const trailing = prompt.trailingContext;
  threads.add({
    seq: call.seq,
    thread: prompt.thread ?? call.seq,
    parent,
    promptIds: call.promptTokenIds,
    choices: call.choices.map((choice, i) => ({ tokenIds: choice.tokenIds, key: prompt.continuation![i] ?? "" })),
    trailing: trailing ? { start: trailing.start, end: trailing.end, keys: trailing.continuation } : null,
  });
}

/** Rebuilds a rollout's threads from its stored token-mode calls that completed. */
export class ThreadBook {
  readonly #store: Store;
  readonly #rollouts: LRUCache<string, RolloutThreads>;

  constructor(store: Store, maxRollouts = 512) {
    this.#store = store;
    this.#rollouts = new LRUCache({ max: maxRollouts });
  }

  /**
   * A rollout's threads, rebuilt from the store when they are not in memory. With gateway workers (a shared store),
   * the calls other workers stored since are added first, so a call continues its thread whichever worker served the
   * call before it.
   */
  of(rolloutId: string): RolloutThreads {
    return this.#store.followCalls(this.#rollouts, rolloutId, () => new RolloutThreads(), addRecord);
  }
}
