// The tree layout on real captured harness sessions (OpenClaw, compactions of Claude Code, Codex, Qwen Code, OpenCode,
// pi, a continued Qwen Code session): the trie holds at most the rollout's unique tokens, every sampled token trained
// once (the rows' trained tokens), and gives each row back exactly.
import assert from "node:assert/strict";
import { test } from "node:test";
import { rowsToTree, treeToRows } from "../rl-core/core/tree-layout.ts";
import { CAPTURED, capturedLayout } from "./tree-fixtures.ts";

for (const name of CAPTURED) {
  test(`${name}: tree ≤ unique tokens, the same trained tokens, rows back exactly`, () => {
    const c = capturedLayout(name);
    assert.ok(c.rows >= 1);
    assert.ok(c.view.size <= c.unique, `tree ${c.view.size} ≤ unique ${c.unique}`);
    assert.ok(c.view.size <= c.rowTokens);
    const treeMask = rowsToTree(c.view, c.lossMask);
    assert.equal(
      treeMask.reduce((a, x) => a + x, 0),
      c.lossMask.reduce((a, x) => a + x, 0),
    );
    assert.deepEqual(treeToRows(c.view, rowsToTree(c.view, c.tokenIds)), c.tokenIds);
    for (let r = 0; r < c.rows; r++)
      for (let i = c.offsets[r]!; i < c.offsets[r + 1]!; i++)
        assert.equal(c.view.positions[c.view.rowNodes[i]!], i - c.offsets[r]!);
  });
}
