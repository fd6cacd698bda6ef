// How the walk reads a page's shell blocks and their marks (scripts/readme-walk/blocks.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { shellBlocks } from "../scripts/readme-walk/blocks.ts";

const PAGE = [
  "# page",
  "<!-- walk: serve 8700 -->",
  "```sh",
  "npm start",
  "```",
  "text",
  "```sh",
  'echo "a"',
  "echo b",
  "```",
  "<!-- walk: skip (needs a GPU) -->",
  "",
  "```bash",
  "vllm serve x",
  "```",
  "```json",
  "{}",
  "```",
].join("\n");

test("shell blocks come in order, verbatim, with their marks; other languages are left out", () => {
  assert.deepEqual(shellBlocks("p.md", PAGE), [
    { file: "p.md", line: 3, text: "npm start", mode: { kind: "serve", ports: [8700] } },
    { file: "p.md", line: 7, text: 'echo "a"\necho b', mode: { kind: "run" } },
    { file: "p.md", line: 13, text: "vllm serve x", mode: { kind: "skip", why: "needs a GPU" } },
  ]);
});

test("a mark applies to the next block only", () => {
  const blocks = shellBlocks("p.md", "<!-- walk: skip (x) -->\n```sh\na\n```\n```sh\nb\n```");
  assert.deepEqual(
    blocks.map((b) => b.mode.kind),
    ["skip", "run"],
  );
});

test("a skip without its reason, an unknown mark, or a mark before a non-shell block is refused", () => {
  assert.throws(() => shellBlocks("p.md", "<!-- walk: skip -->\n```sh\na\n```"), /p\.md:2: walk mark 'skip'/);
  assert.throws(() => shellBlocks("p.md", "<!-- walk: later -->\n```sh\na\n```"), /none of/);
  assert.throws(() => shellBlocks("p.md", "<!-- walk: skip (x) -->\n```json\n{}\n```"), /before a json block/);
});
