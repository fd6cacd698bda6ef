// A radix (compressed) prefix tree over token ids. Edge labels are slices of append-only Int32Array chunks, so memory
// grows with the unique tokens of a rollout (12 B a token: id, owner, logprob) plus one small object per branch point,
// never with the sum of prompt lengths.
//
// Every position in the tree has an owner: CONTEXT, or the sequence that sampled it. Owner codes: `id >= 0` is a
// trusted sequence, `-(id + 2)` an untrusted one (retokenized ids). The first trusted sampler of a position owns it,
// else the first untrusted one.

export const CONTEXT = -1;
const CHUNK_TOKENS = 1 << 15;

export function trustedCode(seqId: number): number {
  return seqId;
}
export function untrustedCode(seqId: number): number {
  return -seqId - 2;
}
/** The sequence id behind an owner code, or null for context. */
export function ownerSeq(code: number): number | null {
  if (code === CONTEXT) return null;
  return code >= 0 ? code : -code - 2;
}

export interface Chunk {
  readonly tokens: Int32Array;
  readonly owner: Int32Array;
  readonly logprob: Float32Array;
  /** Global index of this chunk's first slot (for per-position side tables). */
  readonly base: number;
  used: number;
  /** Routed experts (R3) of each slot, `routingWidth` a slot; allocated when the first routing arrives. */
  experts?: Uint16Array;
  /** 1 where `experts` holds the slot's routing. */
  routed?: Uint8Array;
}

/** The routing rows of a rollout's tree: every row [layers, topK]. */
export interface RoutingShape {
  layers: number;
  topK: number;
}

export class RadixNode {
  chunk: Chunk;
  /** Offset of the label in `chunk`. */
  start: number;
  length: number;
  /** Depth at the end of the label (tokens from the root). Splits keep the lower part as this object, so a node's
   *  end depth never changes: references to "sequence ends here" stay valid. */
  readonly depth: number;
  parent: RadixNode | null;
  children: Map<number, RadixNode> | null = null;
  /** Highest sequence id whose path passes through this node. */
  lastSeq = -1;
  /** Sequences (prompt + completion) ending exactly here. */
  seqEnds: number[] | null = null;
  /** Calls whose prompt ends exactly here. */
  promptEnds: number[] | null = null;

  constructor(chunk: Chunk, start: number, length: number, depth: number, parent: RadixNode | null) {
    this.chunk = chunk;
    this.start = start;
    this.length = length;
    this.depth = depth;
    this.parent = parent;
  }

  get startDepth(): number {
    return this.depth - this.length;
  }

  /** Global slot of the label's k-th token. */
  slot(k: number): number {
    return this.chunk.base + this.start + k;
  }
}

/** A point in the tree: `offset` tokens into `node`'s label (offset === node.length is the node's end). */
export interface Locus {
  node: RadixNode;
  offset: number;
  depth: number;
}

export interface SampleMark {
  code: number;
  /** Logprobs aligned with the ids being matched; null when unknown. */
  logprobs: ArrayLike<number> | null;
}

function makeChunk(size: number, base: number): Chunk {
  return {
    tokens: new Int32Array(size),
    owner: new Int32Array(size),
    logprob: new Float32Array(size),
    base,
    used: 0,
  };
}

export class PrefixTree {
  readonly root: RadixNode;
  readonly #chunks: Chunk[] = [];
  #capacity = 0;
  #size = 0;
  /** The rows' shape, set by the first routing kept; null while the tree has none. */
  routingShape: RoutingShape | null = null;
  #routedSlots = 0;

  constructor() {
    this.root = new RadixNode(makeChunk(0, 0), 0, 0, 0, null);
  }

  /** Tokens stored (= distinct prefixes of everything inserted). */
  get size(): number {
    return this.#size;
  }

  /** Slots allocated; global slot indices are below this. */
  get capacity(): number {
    return this.#capacity;
  }

  get chunks(): readonly Chunk[] {
    return this.#chunks;
  }

  rootLocus(): Locus {
    return { node: this.root, offset: 0, depth: 0 };
  }

  static endOf(node: RadixNode): Locus {
    return { node, offset: node.length, depth: node.depth };
  }

  /**
   * Follows ids[start, end) from `from` as deep as the tree matches. With `mark`, every matched position is recorded
   * as sampled by `mark.code` unless an earlier sampler (trusted, or untrusted when this one is untrusted) owns it.
   */
  match(ids: ArrayLike<number>, start: number, end: number, from: Locus, mark?: SampleMark): Locus {
    let node = from.node;
    let offset = from.offset;
    let i = start;
    while (i < end) {
      if (offset === node.length) {
        const child = node.children?.get(ids[i]!);
        if (child === undefined) break;
        node = child;
        offset = 0;
      }
      const tokens = node.chunk.tokens;
      const base = node.start + offset;
      const limit = Math.min(node.length - offset, end - i);
      let k = 0;
      while (k < limit && tokens[base + k] === ids[i + k]) k++;
      if (mark !== undefined && k > 0) this.#markSampled(node.chunk, base, k, i, mark);
      offset += k;
      i += k;
      if (k < limit) break;
    }
    return { node, offset, depth: node.startDepth + offset };
  }

  #markSampled(chunk: Chunk, base: number, count: number, idsOffset: number, mark: SampleMark): void {
    const trusted = mark.code >= 0;
    const lps = mark.logprobs;
    for (let k = 0; k < count; k++) {
      const current = chunk.owner[base + k]!;
      if (current === CONTEXT || (trusted && current < CONTEXT)) {
        chunk.owner[base + k] = mark.code;
        chunk.logprob[base + k] = trusted ? (lps === null ? NaN : lps[idsOffset + k]!) : 0;
      }
    }
  }

  /** The node that ends exactly at `locus`, splitting a label when the locus is inside it. */
  boundary(locus: Locus): RadixNode {
    const { node, offset } = locus;
    if (offset === node.length) return node;
    if (offset === 0) return node.parent!;
    return this.#split(node, offset);
  }

  #split(node: RadixNode, k: number): RadixNode {
    const parent = node.parent!;
    const upper = new RadixNode(node.chunk, node.start, k, node.startDepth + k, parent);
    upper.lastSeq = node.lastSeq;
    parent.children!.set(node.chunk.tokens[node.start]!, upper);
    node.start += k;
    node.length -= k;
    node.parent = upper;
    upper.children = new Map([[node.chunk.tokens[node.start]!, node]]);
    return upper;
  }

  /**
   * Adds ids[start, end) as a new child of `parent` (which must have no child starting with ids[start]).
   * `code` is CONTEXT for prompt tokens or the sampler's owner code; `logprobs` align with `ids`.
   */
  append(
    parent: RadixNode,
    ids: ArrayLike<number>,
    start: number,
    end: number,
    code: number,
    logprobs: ArrayLike<number> | null,
  ): RadixNode {
    const length = end - start;
    const chunk = this.#alloc(length);
    const at = chunk.used;
    chunk.used += length;
    this.#size += length;
    const { tokens, owner, logprob } = chunk;
    for (let k = 0; k < length; k++) tokens[at + k] = ids[start + k]!;
    owner.fill(code, at, at + length);
    if (code >= 0) {
      if (logprobs === null) logprob.fill(NaN, at, at + length);
      else for (let k = 0; k < length; k++) logprob[at + k] = logprobs[start + k]!;
    }
    const node = new RadixNode(chunk, at, length, parent.depth + length, parent);
    (parent.children ??= new Map()).set(ids[start]!, node);
    return node;
  }

  #alloc(length: number): Chunk {
    const last = this.#chunks[this.#chunks.length - 1];
    if (last !== undefined && last.tokens.length - last.used >= length) return last;
    const chunk = makeChunk(Math.max(length, CHUNK_TOKENS), this.#capacity);
    this.#capacity += chunk.tokens.length;
    this.#chunks.push(chunk);
    return chunk;
  }

  /** Nodes from the root (excluded) down to `node`. */
  static path(node: RadixNode): RadixNode[] {
    const out: RadixNode[] = [];
    for (let n: RadixNode | null = node; n !== null && n.parent !== null; n = n.parent) out.push(n);
    return out.reverse();
  }

  /** Nodes without children, in depth-first order of first tokens. */
  leaves(): RadixNode[] {
    const out: RadixNode[] = [];
    const stack: RadixNode[] = [this.root];
    while (stack.length > 0) {
      const node = stack.pop()!;
      if (node.children === null || node.children.size === 0) {
        if (node !== this.root) out.push(node);
        continue;
      }
      const kids = [...node.children.values()].sort((a, b) => b.chunk.tokens[b.start]! - a.chunk.tokens[a.start]!);
      stack.push(...kids);
    }
    return out;
  }

  /** Positions whose routed experts are kept. */
  get routedSlots(): number {
    return this.#routedSlots;
  }

  /** Whether the k-th token of `node`'s label has routing. */
  hasRouting(node: RadixNode, k: number): boolean {
    return node.chunk.routed?.[node.start + k] === 1;
  }

  /**
   * Keeps `values[offset, offset + width)` as the routing of the k-th token of `node`'s label, unless it has one (the
   * call that processed a position first is its source). Returns false when the slot already had routing.
   */
  setRouting(node: RadixNode, k: number, values: ArrayLike<number>, offset: number): boolean {
    const shape = this.routingShape!;
    const width = shape.layers * shape.topK;
    const chunk = node.chunk;
    const slot = node.start + k;
    if (chunk.routed === undefined) {
      chunk.routed = new Uint8Array(chunk.tokens.length);
      chunk.experts = new Uint16Array(chunk.tokens.length * width);
    }
    if (chunk.routed[slot] === 1) return false;
    chunk.routed[slot] = 1;
    const experts = chunk.experts!;
    for (let j = 0; j < width; j++) experts[slot * width + j] = values[offset + j]!;
    this.#routedSlots++;
    return true;
  }

  /** The routing of the k-th token of `node`'s label (a view; only valid when `hasRouting`). */
  routingOf(node: RadixNode, k: number): Uint16Array {
    const shape = this.routingShape!;
    const width = shape.layers * shape.topK;
    const slot = node.start + k;
    return node.chunk.experts!.subarray(slot * width, (slot + 1) * width);
  }

  /** Counts positions owned by a trusted sampler. */
  countTrustedSampled(): number {
    let n = 0;
    for (const chunk of this.#chunks) {
      const owner = chunk.owner;
      for (let k = 0; k < chunk.used; k++) if (owner[k]! >= 0) n++;
    }
    return n;
  }
}
