// The tree view of a rows batch by hand: depth-first order (a later row branching deeper than an earlier one comes
// before it), each node's fields from the row that trains it, loss weights summed, one trie per rollout.
import assert from "node:assert/strict";
import { test } from "node:test";
import { bytesOf, float32s, int32s, uint8s, type BatchMessage } from "../../protocol/index.ts";
import { rowsToTree, treeBatch, treeToRows, treeView } from "./tree-layout.ts";

// Rollout a: rows A = 1 2 3 4 5, B = 1 2 9, C = 1 2 3 4 7 (C branches below B's branch point); rollout b: D = 1 2.
const rows = [
  { rollout: "a", ids: [1, 2, 3, 4, 5], mask: [0, 0, 1, 1, 1] },
  { rollout: "a", ids: [1, 2, 9], mask: [0, 0, 1] },
  { rollout: "a", ids: [1, 2, 3, 4, 7], mask: [0, 0, 0, 0, 1] },
  { rollout: "b", ids: [1, 2], mask: [0, 1] },
];
const offsets = Int32Array.from([0, 5, 8, 13, 15]);
const ids = Int32Array.from(rows.flatMap((r) => r.ids));
const mask = Uint8Array.from(rows.flatMap((r) => r.mask));

test("depth-first order, parents, positions, subtree ends, one trie per rollout", () => {
  const v = treeView(
    offsets,
    ids,
    mask,
    rows.map((r) => r.rollout),
  );
  // a: 1 2 3 4 5 7 9 (children of 2: 3 then 9, of 4: 5 then 7); b: 1 2.
  assert.deepEqual([...rowsToTree(v, ids)], [1, 2, 3, 4, 5, 7, 9, 1, 2]);
  assert.deepEqual([...v.parents], [-1, 0, 1, 2, 3, 3, 1, -1, 7]);
  assert.deepEqual([...v.positions], [0, 1, 2, 3, 4, 4, 2, 0, 1]);
  assert.deepEqual([...v.subtreeEnds], [7, 7, 6, 6, 5, 6, 7, 9, 9]);
  assert.deepEqual([...v.trieOffsets], [0, 7, 9]);
  assert.deepEqual([...v.rowNodes], [0, 1, 2, 3, 4, 0, 1, 6, 0, 1, 2, 3, 5, 7, 8]);
  assert.deepEqual([...treeToRows(v, rowsToTree(v, ids))], [...ids]);
  // Node 3 (id 3) is trained in A only: its fields come from A; node 7 from C; shared context from the first row.
  assert.deepEqual([...v.tokenRows], [0, 0, 0, 0, 0, 2, 1, 3, 3]);
  // Routing from a row token that was a model input: node 5 (A's last) has none, B's 9 and C's 7 neither.
  assert.deepEqual([...v.routingSource], [0, 1, 2, 3, -1, -1, -1, 13, -1]);
});

test("a node's loss weight is the sum over its rows, its mask and advantage the training row's", () => {
  const weights = Float32Array.from(mask, (m, i) => m * (i + 1) * 0.01);
  const message = {
    batchId: 1,
    rows: 4,
    offsets: bytesOf(offsets),
    tokenIds: bytesOf(ids),
    lossMask: bytesOf(mask),
    logprobs: bytesOf(Float32Array.from(ids, (x) => -x / 10)),
    advantages: bytesOf(Float32Array.from(mask, (m, i) => m * (i + 1))),
    lossWeights: bytesOf(weights),
    callIndex: bytesOf(Int32Array.from(mask, (m) => (m ? 0 : -1))),
    rowInfo: rows.map((r, i) => ({ rolloutId: r.rollout, trajectoryId: `t${i}` })),
  } as unknown as BatchMessage;
  const t = treeBatch(message);
  assert.equal(t.layout, "tree");
  assert.equal(t.tokens, 9);
  assert.equal(t.rowTokens, 15);
  assert.deepEqual([...uint8s(t.lossMask)], [0, 0, 1, 1, 1, 1, 1, 0, 1]);
  const w = float32s(t.lossWeights);
  assert.equal(
    w.reduce((a, x) => a + x, 0),
    weights.reduce((a, x) => a + x, 0),
  );
  assert.deepEqual([...float32s(t.advantages)], [0, 0, 3, 4, 5, 13, 8, 0, 15]);
  assert.deepEqual([...int32s(t.callIndex)], [-1, -1, 0, 0, 0, 0, 0, -1, 0]);
});
