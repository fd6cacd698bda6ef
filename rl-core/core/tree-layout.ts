// The tree layout of a batch (`rlgate core --layout tree`): each rollout's rows merged into one token trie, every
// distinct (prefix, token) once, in depth-first order. A harness that rewrites its context (a message moved to the
// end of every request, compactions, continued sessions) leaves many rows sharing most tokens; a trainer with tree
// attention then computes once per trie node instead of once per row token.
//
// The trie is per rollout, not per group: a node carries one value of every per-token field, and tokens of two
// rollouts differ in advantage, policy version and routed experts even where their ids and prefixes agree. What a
// group trie would merge on top (the shared system prompt, context only) is measured by `npm run bench:tree`.
//
// Every per-token field of a node is the one of the row token that trains it (mask 1; rows train a sampled token
// shared by several rows in the first only), else of the first row through it; its loss weight is the sum over the
// rows through it, which is that one weight (rows weigh mask-0 tokens 0). So sum(loss_weights · per_token_loss) is
// the same sum of the same terms in both layouts, whatever the loss aggregation.
import { bytesOf, float32s, int32s, uint8s, type BatchMessage } from "../../protocol/index.ts";

export type BatchLayout = "rows" | "tree";
export const BATCH_LAYOUTS: readonly BatchLayout[] = ["rows", "tree"];

/** Where each row token went in the tree, and which row token each tree token takes its fields from. */
export interface TreeView {
  /** Tree tokens. */
  readonly size: number;
  /** Per row token: its tree token. */
  readonly rowNodes: Int32Array;
  /** Per tree token: the row token whose fields it carries (the one trained, else the first). */
  readonly source: Int32Array;
  /** Per tree token: a row token through it that is not its row's last (-1: none), for routed experts. */
  readonly routingSource: Int32Array;
  readonly parents: Int32Array;
  readonly positions: Int32Array;
  /** Per tree token: the end (exclusive) of its subtree, which depth-first order makes the span after it. */
  readonly subtreeEnds: Int32Array;
  /** Per tree token: the row of `source`. */
  readonly tokenRows: Int32Array;
  /** One trie per rollout: tries + 1 entries. */
  readonly trieOffsets: Int32Array;
}

// Child lookup key: (parent + 1) · 2^21 + token id (vocabularies below 2M ids; exact below 2^53 for 2^31 nodes).
const TOKEN_SPAN = 2 ** 21;

/** Builds one rollout's trie over row tokens [from, to) and appends it to the view's arrays at `base`. */
function addTrie(
  tokenIds: Int32Array,
  lossMask: Uint8Array,
  rowEnds: ReadonlySet<number>,
  from: number,
  to: number,
  base: number,
  out: { rowNodes: Int32Array; source: number[]; routing: number[]; parents: number[]; positions: number[] },
  rowStarts: ReadonlySet<number>,
): number {
  const child = new Map<number, number>();
  const parent: number[] = [];
  const depth: number[] = [];
  const source: number[] = [];
  const routing: number[] = [];
  const firstChild: number[] = [];
  const lastChild: number[] = [];
  const next: number[] = [];
  const roots: number[] = [];
  const local = new Int32Array(to - from);
  let at = -1;
  for (let i = from; i < to; i++) {
    if (rowStarts.has(i)) at = -1;
    const token = tokenIds[i]!;
    if (token < 0 || token >= TOKEN_SPAN) throw new Error(`token id ${token} is outside [0, ${TOKEN_SPAN})`);
    const key = (at + 1) * TOKEN_SPAN + token;
    let node = child.get(key);
    if (node === undefined) {
      node = parent.length;
      child.set(key, node);
      parent.push(at);
      depth.push(at < 0 ? 0 : depth[at]! + 1);
      source.push(i);
      routing.push(-1);
      firstChild.push(-1);
      lastChild.push(-1);
      next.push(-1);
      if (at < 0) roots.push(node);
      else {
        if (lastChild[at]! < 0) firstChild[at] = node;
        else next[lastChild[at]!] = node;
        lastChild[at] = node;
      }
    } else if (lossMask[i] && !lossMask[source[node]!]) source[node] = i;
    if (routing[node]! < 0 && !rowEnds.has(i)) routing[node] = i;
    local[i - from] = node;
    at = node;
  }
  // Depth first, children in the order rows first reached them: a node's subtree is the span right after it.
  const order = new Int32Array(parent.length);
  const stack: number[] = [];
  for (let r = roots.length - 1; r >= 0; r--) stack.push(roots[r]!);
  let k = 0;
  while (stack.length) {
    const node = stack.pop()!;
    order[node] = k++;
    const kids: number[] = [];
    for (let c = firstChild[node]!; c >= 0; c = next[c]!) kids.push(c);
    for (let c = kids.length - 1; c >= 0; c--) stack.push(kids[c]!);
  }
  for (let node = 0; node < parent.length; node++) {
    const at2 = base + order[node]!;
    out.source[at2] = source[node]!;
    out.routing[at2] = routing[node]!;
    out.parents[at2] = parent[node]! < 0 ? -1 : base + order[parent[node]!]!;
    out.positions[at2] = depth[node]!;
  }
  for (let i = from; i < to; i++) out.rowNodes[i] = base + order[local[i - from]!]!;
  return parent.length;
}

/** The tree view of a rows batch: rows of one rollout are contiguous (the packer never splits a rollout). */
export function treeView(
  offsets: Int32Array,
  tokenIds: Int32Array,
  lossMask: Uint8Array,
  rolloutIds: readonly string[],
): TreeView {
  const rows = offsets.length - 1;
  const rowNodes = new Int32Array(tokenIds.length);
  const out = {
    rowNodes,
    source: [] as number[],
    routing: [] as number[],
    parents: [] as number[],
    positions: [] as number[],
  };
  const rowStarts = new Set<number>();
  const rowEnds = new Set<number>();
  for (let r = 0; r < rows; r++) {
    rowStarts.add(offsets[r]!);
    if (offsets[r + 1]! > offsets[r]!) rowEnds.add(offsets[r + 1]! - 1);
  }
  const tries = [0];
  let size = 0;
  for (let r = 0; r < rows;) {
    let end = r + 1;
    while (end < rows && rolloutIds[end] === rolloutIds[r]) end++;
    size += addTrie(tokenIds, lossMask, rowEnds, offsets[r]!, offsets[end]!, size, out, rowStarts);
    tries.push(size);
    r = end;
  }
  const rowOf = new Int32Array(tokenIds.length);
  for (let r = 0; r < rows; r++) rowOf.fill(r, offsets[r]!, offsets[r + 1]!);
  const source = Int32Array.from(out.source);
  const parents = Int32Array.from(out.parents);
  const ends = Int32Array.from(parents, (_, t) => t + 1);
  for (let t = parents.length - 1; t >= 0; t--) {
    const p = parents[t]!;
    if (p >= 0 && ends[t]! > ends[p]!) ends[p] = ends[t]!;
  }
  return {
    size,
    rowNodes,
    source,
    routingSource: Int32Array.from(out.routing),
    parents,
    positions: Int32Array.from(out.positions),
    subtreeEnds: ends,
    tokenRows: source.map((i) => rowOf[i]!),
    trieOffsets: Int32Array.from(tries),
  };
}

/** A per-token array of the rows layout in the tree layout: each tree token's source row token. */
export function rowsToTree<T extends Float32Array | Int32Array | Uint8Array>(view: TreeView, values: T): T {
  const out = new (values.constructor as new (n: number) => T)(view.size);
  for (let t = 0; t < view.size; t++) out[t] = values[view.source[t]!]!;
  return out;
}

/** A per-token array of the tree layout in the rows layout: each row token's tree token. */
export function treeToRows<T extends Float32Array | Int32Array | Uint8Array>(view: TreeView, values: T): T {
  const out = new (values.constructor as new (n: number) => T)(view.rowNodes.length);
  for (let i = 0; i < view.rowNodes.length; i++) out[i] = values[view.rowNodes[i]!]!;
  return out;
}

/** The view of a served rows batch. */
export function batchTreeView(batch: BatchMessage): TreeView {
  return treeView(
    int32s(batch.offsets),
    int32s(batch.tokenIds),
    uint8s(batch.lossMask),
    batch.rowInfo.map((r) => r.rolloutId),
  );
}

/** Routed experts ([tokens, layers, top_k]) in the tree layout: from a row token that was a model input. */
function treeRouting(batch: BatchMessage, view: TreeView): Uint8Array | undefined {
  if (!batch.routedExperts?.byteLength) return undefined;
  const width = (batch.moeLayers ?? 0) * (batch.moeTopK ?? 0) * (batch.routedExpertsDtype === "uint16" ? 2 : 1);
  const out = new Uint8Array(view.size * width);
  const src = batch.routedExperts;
  for (let t = 0; t < view.size; t++) {
    const i = view.routingSource[t]!;
    if (i >= 0) out.set(src.subarray(i * width, (i + 1) * width), t * width);
  }
  return out;
}

/** A rows batch message in the tree layout (the rows' own fields stay: row_info, offsets over row_nodes). */
export function treeBatch(batch: BatchMessage, view: TreeView = batchTreeView(batch)): BatchMessage {
  const weights = new Float32Array(view.size);
  const rowWeights = float32s(batch.lossWeights);
  // Summed in float64 and rounded once: the single nonzero term comes out bit-equal.
  const sums = new Float64Array(view.size);
  for (let i = 0; i < rowWeights.length; i++) sums[view.rowNodes[i]!]! += rowWeights[i]!;
  weights.set(sums);
  const routedExperts = treeRouting(batch, view);
  return {
    ...batch,
    layout: "tree",
    tokenIds: bytesOf(rowsToTree(view, int32s(batch.tokenIds))),
    lossMask: bytesOf(rowsToTree(view, uint8s(batch.lossMask))),
    logprobs: bytesOf(rowsToTree(view, float32s(batch.logprobs))),
    advantages: bytesOf(rowsToTree(view, float32s(batch.advantages))),
    lossWeights: bytesOf(weights),
    callIndex: bytesOf(rowsToTree(view, int32s(batch.callIndex))),
    ...(routedExperts ? { routedExperts } : {}),
    parents: bytesOf(view.parents),
    positions: bytesOf(view.positions),
    tokenRows: bytesOf(view.tokenRows),
    rowNodes: bytesOf(view.rowNodes),
    trieOffsets: bytesOf(view.trieOffsets),
    subtreeEnds: bytesOf(view.subtreeEnds),
    tokens: view.size,
    rowTokens: view.rowNodes.length,
  };
}
