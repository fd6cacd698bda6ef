// One rollout's prefix tree, built call by call. `add` attaches a call (and says where: the storage reference for its
// prompt); `build` turns the tree into trajectories. Add calls in seq order for a deterministic result
// (`reconstructRollout` does).
import { assemble } from "./assemble.ts";
import { callShape, noteCall, prepareCall, type CallNote } from "./call-tokens.ts";
import { countTurns, divergesInSystemPrompt, QWEN3_CHAT_FORMAT, type ChatFormat } from "./chat-format.ts";
import type { DivergenceFacts } from "./classify.ts";
import { CONTEXT, ownerSeq, PrefixTree, RadixNode, trustedCode, untrustedCode } from "./prefix-tree.ts";
import { SegmentBook } from "./segments.ts";
import { contentRange, GramIndex, markupBreakOwner, movedContext, type BranchToken } from "./thread-rules.ts";
import { attachCall, type Emitter, type SeqRecord, type TrajectorySource, type TreeCall } from "./source.ts";
import type { CallAttach, CallTokens, ChoiceTokens, ReconstructOptions, Reconstruction, SequenceRef } from "./types.ts";
import type { RolloutRouting } from "./source.ts";
import { routingValues } from "../util/routed-experts.ts";

/** Where a token sequence's deepest stored match ends: `ids[0, matchedTokens)` equals the first tokens of `ref`. */
export interface Located {
  ref: SequenceRef | null;
  matchedTokens: number;
}

interface TreeSeq extends SeqRecord {
  endNode: RadixNode;
  callIndex: number;
}

interface TreeCallEntry extends TreeCall {
  promptNode: RadixNode;
}

export class RolloutTree implements TrajectorySource {
  readonly tree = new PrefixTree();
  readonly segments = new SegmentBook();
  readonly #format: ChatFormat;
  readonly #seqs: TreeSeq[] = [];
  readonly #calls: TreeCallEntry[] = [];
  readonly #notes: CallNote[] = [];
  /** Whether any kept routing was uint16 (more than 256 experts); routing the tree could not keep. */
  #routingWide = false;
  readonly #routingIssues: Array<{ callSeq: number; issue: string }> = [];

  constructor(format: ChatFormat = QWEN3_CHAT_FORMAT) {
    this.#format = format;
  }

  get seqs(): readonly SeqRecord[] {
    return this.#seqs;
  }
  get treeCalls(): readonly TreeCall[] {
    return this.#calls;
  }
  get notes(): readonly CallNote[] {
    return this.#notes;
  }

  /** Adds one call; returns where its prompt attached, or null when it adds nothing (failed, no token ids). */
  add(call: CallTokens): CallAttach | null {
    return this.#add(call).attach;
  }

  /**
   * Adds one call (as `add`) and says where its prompt matched before it was added (what `locate` said of it then):
   * the prompt, an agent's whole history, is walked once instead of twice.
   */
  addLocated(call: CallTokens): { attach: CallAttach | null; located: Located } {
    const { attach, located } = this.#add(call);
    // A call that adds nothing leaves the tree as it was: its prompt is located now.
    return { attach, located: located ?? this.locate(call.promptIds ?? []) };
  }

  /** `located`: where the prompt matched before the call was added; null when the call adds nothing. */
  #add(call: CallTokens): { attach: CallAttach | null; located: Located | null } {
    const prepared = prepareCall(call);
    this.#notes.push(noteCall(prepared));
    if (!prepared.usable) return { attach: null, located: null };
    const tree = this.tree;
    const prompt = prepared.prompt;
    const locus = tree.match(prompt, 0, prompt.length, tree.rootLocus());
    // Read before the call's own tokens enter the tree (they move the nodes' latest sequence).
    const located = this.#located(locus.node, locus.depth);
    const facts = this.#facts(locus.node, locus.offset, locus.depth, prompt);
    const { attach, brk } = attachCall(
      call.callSeq,
      prompt.length,
      facts,
      this.#seqs,
      this.segments,
      callShape(prepared),
    );

    let promptNode = tree.boundary(locus);
    if (locus.depth < prompt.length)
      promptNode = tree.append(promptNode, prompt, locus.depth, prompt.length, CONTEXT, null);
    const callIndex = this.#calls.length;
    (promptNode.promptEnds ??= []).push(callIndex);
    const entry: TreeCallEntry = {
      callSeq: call.callSeq,
      promptLength: prompt.length,
      attach,
      brk,
      seqIds: [],
      promptNode,
    };
    this.#calls.push(entry);

    for (const choice of prepared.choices) {
      const id = this.#seqs.length;
      const code = prepared.trusted ? trustedCode(id) : untrustedCode(id);
      const ids = choice.tokenIds;
      const mark = { code, logprobs: choice.logprobs };
      const reached = tree.match(ids, 0, ids.length, PrefixTree.endOf(promptNode), mark);
      let endNode = tree.boundary(reached);
      const consumed = reached.depth - promptNode.depth;
      if (consumed < ids.length) endNode = tree.append(endNode, ids, consumed, ids.length, code, choice.logprobs);
      (endNode.seqEnds ??= []).push(id);
      for (let n: RadixNode | null = endNode; n !== null; n = n.parent) if (n.lastSeq < id) n.lastSeq = id;
      const routing = call.choices.find((c) => c.index === choice.index)?.routing;
      if (routing && routing.rows > 0) this.#keepRouting(call.callSeq, endNode, routing);
      this.#seqs.push({
        id,
        callSeq: call.callSeq,
        choiceIndex: choice.index,
        promptLength: prompt.length,
        length: prompt.length + ids.length,
        trusted: prepared.trusted,
        segmentId: attach.segmentId,
        logprobs: choice.logprobs,
        endNode,
        callIndex,
      });
      entry.seqIds.push(id);
    }
    return { attach, located };
  }

  /**
   * Keeps a choice's routing rows at the positions of its sequence (which ends at `endNode`) that have none yet: each
   * position's routing comes from the first call that processed it.
   */
  #keepRouting(callSeq: number, endNode: RadixNode, routing: NonNullable<ChoiceTokens["routing"]>): void {
    const tree = this.tree;
    const shape = tree.routingShape;
    if (shape === null) tree.routingShape = { layers: routing.layers, topK: routing.topK };
    else if (shape.layers !== routing.layers || shape.topK !== routing.topK) {
      this.#routingIssues.push({
        callSeq,
        issue: `routing of shape [${routing.layers}, ${routing.topK}] in a rollout of [${shape.layers}, ${shape.topK}]`,
      });
      return;
    }
    if (routing.dtype === "uint16") this.#routingWide = true;
    const values = routingValues(routing);
    const width = routing.layers * routing.topK;
    const first = routing.start;
    const end = Math.min(routing.start + routing.rows, endNode.depth);
    for (let node: RadixNode | null = endNode; node !== null && node.depth > first; node = node.parent) {
      const from = Math.max(first, node.startDepth);
      const to = Math.min(end, node.depth);
      for (let p = from; p < to; p++) tree.setRouting(node, p - node.startDepth, values, (p - first) * width);
    }
  }

  /** How many leading positions of `ids` have routing in the tree. */
  routedPrefix(ids: ArrayLike<number>): number {
    const tree = this.tree;
    if (tree.routingShape === null) return 0;
    let node = tree.root;
    let depth = 0;
    while (depth < ids.length) {
      const child = node.children?.get(ids[depth]!);
      if (child === undefined) return depth;
      node = child;
      const tokens = node.chunk.tokens;
      for (let k = 0; k < node.length && depth < ids.length; k++, depth++) {
        if (tokens[node.start + k] !== ids[depth] || !tree.hasRouting(node, k)) return depth;
      }
    }
    return depth;
  }

  routing(): RolloutRouting | null {
    const shape = this.tree.routingShape;
    if (shape === null) return null;
    return { ...shape, dtype: this.#routingWide ? "uint16" : "uint8", issues: this.#routingIssues };
  }

  /**
   * The deepest stored match of any token sequence (e.g. the prompt of a failed call, which never enters the tree):
   * `ids[0, matchedTokens)` equals the first tokens of sequence `ref`. For storing prompts as reference + new tokens.
   */
  locate(ids: ArrayLike<number>): Located {
    const locus = this.tree.match(ids, 0, ids.length, this.tree.rootLocus());
    return this.#located(locus.node, locus.depth);
  }

  #located(node: RadixNode, depth: number): Located {
    const seq = depth === 0 ? undefined : this.#seqs[node.lastSeq];
    if (seq === undefined) return { ref: null, matchedTokens: 0 };
    return { ref: { callSeq: seq.callSeq, choiceIndex: seq.choiceIndex }, matchedTokens: depth };
  }

  #facts(node: RadixNode, offset: number, matched: number, prompt: ArrayLike<number>): DivergenceFacts {
    const atEnd = offset === node.length;
    let identical: number | null = null;
    let extended: number | null = null;
    // Sequence ids grow in the order calls are added, and both lists are appended in that order: the latest entry
    // holds the largest id (looked up from the end, so a prompt repeated thousands of times costs no more).
    if (atEnd && matched === prompt.length && node.promptEnds !== null) {
      for (let i = node.promptEnds.length - 1; i >= 0 && identical === null; i--) {
        const ids = this.#calls[node.promptEnds[i]!]!.seqIds;
        if (ids.length > 0) identical = ids[ids.length - 1]!;
      }
    }
    if (atEnd && node.seqEnds !== null && node.seqEnds.length > 0) extended = node.seqEnds[node.seqEnds.length - 1]!;
    let oldBranch: number | null = null;
    let oldSlot = -1;
    let oldNode: RadixNode | null = null;
    if (!atEnd) {
      oldBranch = node.lastSeq;
      oldNode = node;
      oldSlot = node.start + offset;
    } else if (node.children !== null) {
      for (const child of node.children.values()) {
        if (oldNode === null || child.lastSeq > oldNode.lastSeq) oldNode = child;
      }
      if (oldNode !== null) {
        oldBranch = oldNode.lastSeq;
        oldSlot = oldNode.start;
      }
    }
    const format = this.#format;
    return {
      empty: this.#seqs.length === 0,
      promptLength: prompt.length,
      matched,
      identical,
      extended,
      oldBranch,
      oldOwner: oldNode === null ? null : ownerSeq(oldNode.chunk.owner[oldSlot]!),
      oldToken: oldNode === null ? null : oldNode.chunk.tokens[oldSlot]!,
      format,
      inSystemPrompt: () => divergesInSystemPrompt(prompt, matched, format),
      fewerTurns: () => {
        const old = this.#seqs[oldBranch!]!;
        return countTurns(prompt, format) < this.#turnsOnPath(this.#calls[old.callIndex]!.promptNode);
      },
      markupOwner: () => markupBreakOwner(prompt, matched, format, this.#reader(oldBranch!)),
      movedContext: () => {
        const read = this.#reader(oldBranch!);
        const at = (i: number) => read(i)?.token ?? null;
        return movedContext(prompt, matched, format, at, this.#seqs[oldBranch!]!.promptLength);
      },
      summarySource: () => {
        const index = new GramIndex(prompt, format);
        for (let id = this.#seqs.length - 1; id >= 0; id--) {
          const seq = this.#seqs[id]!;
          const sampled = this.#sampledIds(seq);
          const [start, end] = contentRange(sampled, format);
          if (index.holdsSummary(sampled, start, end)) return id;
        }
        return null;
      },
    };
  }

  /**
   * Reads sequence `seqId` by depth: its token and the sequence that sampled it (branches only). Reads go mostly
   * forward, so the node of the last read is where the next is looked for.
   */
  #reader(seqId: number): (depth: number) => BranchToken | null {
    const path = PrefixTree.path(this.#seqs[seqId]!.endNode);
    let j = 0;
    return (depth) => {
      if (path.length === 0) return null;
      while (j > 0 && path[j]!.startDepth > depth) j--;
      while (j < path.length - 1 && path[j]!.startDepth + path[j]!.length <= depth) j++;
      const node = path[j]!;
      const k = depth - node.startDepth;
      if (k < 0 || k >= node.length) return null;
      const slot = node.start + k;
      return { token: node.chunk.tokens[slot]!, sampledBy: ownerSeq(node.chunk.owner[slot]!) };
    };
  }

  /** A sequence's sampled ids, read back from the tree (only when a new thread looks for the summary it starts from). */
  #sampledIds(seq: TreeSeq): Int32Array {
    const out = new Int32Array(seq.length - seq.promptLength);
    for (
      let node: RadixNode | null = seq.endNode;
      node !== null && node.startDepth + node.length > seq.promptLength;
      node = node.parent
    ) {
      for (let k = Math.max(0, seq.promptLength - node.startDepth); k < node.length; k++) {
        out[node.startDepth + k - seq.promptLength] = node.chunk.tokens[node.start + k]!;
      }
    }
    return out;
  }

  /** Turns in the prompt that ends at `node` (the tree keeps no prompt arrays). */
  #turnsOnPath(node: RadixNode): number {
    let n = 0;
    for (const step of PrefixTree.path(node))
      n += countTurns(step.chunk.tokens.subarray(step.start, step.start + step.length), this.#format);
    return n;
  }

  leafGroups(): number[][] {
    return this.tree.leaves().map((leaf) => [...leaf.seqEnds!]);
  }

  isDead(seqId: number): boolean {
    const seq = this.#seqs[seqId]!;
    const node = this.#calls[seq.callIndex]!.promptNode;
    return node.promptEnds!.some((c) => this.#calls[c]!.callSeq > seq.callSeq);
  }

  uniqueTokens(): number {
    return this.tree.size;
  }

  sampledTokens(): number {
    return this.tree.countTrustedSampled();
  }

  emitter(): Emitter {
    const trainedSlots = new Uint8Array(this.tree.capacity);
    return (rep, trained) => {
      const seqs = this.#seqs;
      const leaf = seqs[rep]!;
      const path = PrefixTree.path(leaf.endNode);
      const length = leaf.endNode.depth;
      const tokenIds = new Int32Array(length);
      const attribution = new Int32Array(length).fill(-1);
      const logprobs = new Float32Array(length);
      const lossMask = new Uint8Array(length);
      const onPath: number[] = [];
      const promptCalls: number[] = [];
      for (const c of this.tree.root.promptEnds ?? []) promptCalls.push(this.#calls[c]!.callSeq);
      for (const node of path) {
        tokenIds.set(node.chunk.tokens.subarray(node.start, node.start + node.length), node.startDepth);
        if (node.seqEnds !== null) onPath.push(...node.seqEnds);
        if (node.promptEnds !== null) for (const c of node.promptEnds) promptCalls.push(this.#calls[c]!.callSeq);
      }
      // Who is credited with a sampled position, first match wins: a trusted sequence wholly on the path (the latest),
      // the position's trusted owner (a completion the path left, e.g. re-serialized), an untrusted sequence wholly on
      // the path, the untrusted owner.
      onPath.sort((a, b) => a - b);
      let untrustedOnPath: Int32Array | null = null;
      for (const id of onPath) {
        const seq = seqs[id]!;
        const target = seq.trusted ? attribution : (untrustedOnPath ??= new Int32Array(length).fill(-1));
        const lps = seq.logprobs;
        for (let i = seq.promptLength; i < seq.length; i++) {
          target[i] = id;
          if (seq.trusted) logprobs[i] = lps === null ? NaN : lps[i - seq.promptLength]!;
        }
      }
      for (const node of path) {
        const { owner, logprob } = node.chunk;
        for (let k = 0, i = node.startDepth; k < node.length; k++, i++) {
          const slot = node.start + k;
          if (attribution[i] === -1) {
            const code = owner[slot]!;
            if (code >= 0) {
              attribution[i] = code;
              logprobs[i] = logprob[slot]!;
            } else if (untrustedOnPath !== null && untrustedOnPath[i] !== -1) attribution[i] = untrustedOnPath[i]!;
            else if (code !== CONTEXT) attribution[i] = ownerSeq(code)!;
          }
          const credited = attribution[i]!;
          if (trained && credited >= 0 && seqs[credited]!.trusted) {
            const global = node.chunk.base + slot;
            if (trainedSlots[global] === 0) {
              trainedSlots[global] = 1;
              lossMask[i] = 1;
            }
          }
        }
      }
      return { tokenIds, lossMask, logprobs, attribution, promptCalls, ...this.#routingOnPath(path, length) };
    };
  }

  /** The routing rows of a path's positions, when the rollout has routing. */
  #routingOnPath(path: readonly RadixNode[], length: number): { routing?: { experts: Uint16Array; missing: number } } {
    const tree = this.tree;
    const shape = tree.routingShape;
    if (shape === null) return {};
    const width = shape.layers * shape.topK;
    const experts = new Uint16Array(length * width);
    let missing = 0;
    for (const node of path) {
      for (let k = 0, i = node.startDepth; k < node.length; k++, i++) {
        if (tree.hasRouting(node, k)) experts.set(tree.routingOf(node, k), i * width);
        else if (i < length - 1) missing++;
      }
    }
    // The last token was never a model input: no row, whatever a later call may have processed.
    if (length > 0) experts.fill(0, (length - 1) * width);
    return { routing: { experts, missing } };
  }

  build(options: ReconstructOptions): Reconstruction {
    return assemble(this, options);
  }
}
