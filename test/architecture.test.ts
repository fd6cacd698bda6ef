// docs/architecture.md draws the imports between folders as dependency-cruiser finds them: the drawing is current,
// and every arrow points down the layers.
import assert from "node:assert/strict";
import { test } from "node:test";
import { currentDrawing, drawing, folderEdges } from "../scripts/architecture.mjs";

const LAYERS = [
  "cli",
  "gateway|rl-core|runner|sim|replay",
  "ui|clients",
  "trajectory",
  "store",
  "protocol",
  "tokenizer",
  "util",
];
const layer = (folder: string) => LAYERS.findIndex((l) => l.split("|").includes(folder));

test(
  "docs/architecture.md's drawing is the imports as they are (npm run arch -- --write redraws it)",
  { timeout: 120_000 },
  () => {
    const edges = folderEdges();
    assert.equal(currentDrawing(), drawing(edges));
    for (const edge of edges) {
      const [from, to] = edge.split(" --> ") as [string, string];
      assert.ok(layer(from) >= 0 && layer(to) >= 0, `${edge}: a folder missing from the layers`);
      assert.ok(layer(from) < layer(to), `${edge} points up or sideways`);
    }
  },
);
