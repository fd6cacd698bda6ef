import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CONTEXT, ownerSeq, PrefixTree, RadixNode, trustedCode, untrustedCode } from "./prefix-tree.ts";

function insert(tree: PrefixTree, ids: number[], code = CONTEXT, logprobs: number[] | null = null): RadixNode {
  const reached = tree.match(ids, 0, ids.length, tree.rootLocus());
  const node = tree.boundary(reached);
  return reached.depth < ids.length ? tree.append(node, ids, reached.depth, ids.length, code, logprobs) : node;
}

function label(node: RadixNode): number[] {
  return [...node.chunk.tokens.subarray(node.start, node.start + node.length)];
}

describe("PrefixTree", () => {
  it("stores shared prefixes once, splits labels in place and finds the deepest match", () => {
    const tree = new PrefixTree();
    const a = insert(tree, [1, 2, 3, 4]);
    const b = insert(tree, [1, 2, 5]);
    const c = insert(tree, [1, 2, 3, 4, 6, 7]);
    assert.equal(tree.size, 4 + 1 + 2);
    // [1,2,3,4] was split at depth 2; the original node is still the one ending at depth 4.
    assert.deepEqual([a.startDepth, a.depth, label(a)], [2, 4, [3, 4]]);
    assert.deepEqual([b.startDepth, b.depth, label(b)], [2, 3, [5]]);
    assert.deepEqual([c.startDepth, c.depth, label(c)], [4, 6, [6, 7]]);
    assert.equal(a.parent, b.parent);
    assert.deepEqual(label(a.parent!), [1, 2]);
    // The split halves are views of the same chunk: no token was copied.
    assert.equal(a.chunk, a.parent!.chunk);
    assert.equal(a.parent!.start + a.parent!.length, a.start);

    const mid = tree.match([1, 2, 3, 9], 0, 4, tree.rootLocus());
    assert.deepEqual([mid.node, mid.offset, mid.depth], [a, 1, 3]);
    const end = tree.match([1, 2, 3, 4, 6, 7, 8], 0, 7, tree.rootLocus());
    assert.deepEqual([end.node, end.offset, end.depth], [c, 2, 6]);
    const none = tree.match([9], 0, 1, tree.rootLocus());
    assert.deepEqual([none.node, none.depth], [tree.root, 0]);
    assert.deepEqual(
      PrefixTree.path(c).map((n) => n.depth),
      [2, 4, 6],
    );
    assert.deepEqual(tree.leaves(), [c, b]);
  });

  it("matches from any locus and inserts a prefix of an existing label as a boundary", () => {
    const tree = new PrefixTree();
    const long = insert(tree, [5, 6, 7, 8, 9]);
    const short = insert(tree, [5, 6, 7]);
    assert.equal(tree.size, 5);
    assert.deepEqual([short.depth, long.startDepth], [3, 3]);
    const resumed = tree.match([8, 9, 10], 0, 3, PrefixTree.endOf(short));
    assert.deepEqual([resumed.node, resumed.depth], [long, 5]);
  });

  it("credits the first trusted sampler of a position; a trusted sampler replaces an untrusted one", () => {
    const tree = new PrefixTree();
    const prompt = insert(tree, [1, 2]);
    const untrusted = tree.append(prompt, [3, 4], 0, 2, untrustedCode(0), null);
    assert.equal(ownerSeq(untrusted.chunk.owner[untrusted.start]!), 0);
    tree.match([3, 4], 0, 2, PrefixTree.endOf(prompt), { code: trustedCode(1), logprobs: [-0.5, -0.25] });
    tree.match([3, 4], 0, 2, PrefixTree.endOf(prompt), { code: trustedCode(2), logprobs: [-9, -9] });
    const owner = untrusted.chunk.owner;
    assert.deepEqual([owner[untrusted.start], owner[untrusted.start + 1]], [1, 1]);
    assert.deepEqual([...untrusted.chunk.logprob.subarray(untrusted.start, untrusted.start + 2)], [-0.5, -0.25]);
    // Prompt tokens stay context until something samples them.
    assert.equal(prompt.chunk.owner[prompt.start], CONTEXT);
  });

  it("keeps memory proportional to unique tokens: 100 prompts of up to 64k tokens, ~64k stored", () => {
    const tree = new PrefixTree();
    const conversation = Int32Array.from({ length: 66_000 }, (_, i) => (i * 7919) % 150_000);
    let node = tree.root;
    for (let turn = 1; turn <= 100; turn++) {
      const prompt = conversation.subarray(0, turn * 650);
      const reached = tree.match(prompt, 0, prompt.length, tree.rootLocus());
      assert.equal(reached.depth, (turn - 1) * 650);
      node = tree.append(tree.boundary(reached), prompt, reached.depth, prompt.length, CONTEXT, null);
    }
    assert.equal(tree.size, 65_000);
    assert.ok(tree.capacity < tree.size + 40_000, `capacity ${tree.capacity}`);
    assert.equal(PrefixTree.path(node).length, 100);
  });
});
