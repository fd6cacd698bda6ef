// Every relative link of README.md and docs/*.md reaches a file, and its #anchor a heading there (as GitHub makes
// heading ids): when a section moves between pages, the links to it fail here instead of on a reader.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { ROOT } from "../scripts/working-tree-copy.ts";

const PAGES = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** The lines of a Markdown file outside fenced code blocks, with their 1-based numbers. */
function proseLines(file: string): [number, string][] {
  let fenced = false;
  const out: [number, string][] = [];
  readFileSync(file, "utf8")
    .split("\n")
    .forEach((line, i) => {
      if (/^(```|~~~)/.test(line)) fenced = !fenced;
      else if (!fenced) out.push([i + 1, line]);
    });
  return out;
}

/** The ids GitHub gives a file's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function headingIds(file: string): Set<string> {
  const ids = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, line] of proseLines(file)) {
    const heading = /^#{1,6}\s+(.*)$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const text = heading.replace(/\[([^\]]*)\]\([^)]*\)/g, "$1").replace(/`/g, "");
    const id = text
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/ /g, "-");
    const n = seen.get(id) ?? 0;
    seen.set(id, n + 1);
    ids.add(n === 0 ? id : `${id}-${n}`);
  }
  return ids;
}

test("README.md and docs/*.md link only to files and headings that exist", () => {
  const broken: string[] = [];
  for (const page of PAGES) {
    for (const [number, line] of proseLines(join(ROOT, page))) {
      for (const [, target] of line.replace(/`[^`]*`/g, "").matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue; // http:, https:, mailto:
        const [path, anchor] = target!.split("#");
        const file = path ? normalize(join(dirname(join(ROOT, page)), path)) : join(ROOT, page);
        if (!existsSync(file)) broken.push(`${page}:${number}: ${target} (no ${relative(ROOT, file)})`);
        else if (anchor && file.endsWith(".md") && !headingIds(file).has(anchor))
          broken.push(`${page}:${number}: ${target} (no such heading)`);
      }
    }
  }
  assert.deepEqual(broken, []);
});

test("heading ids are GitHub's", () => {
  const ids = headingIds(join(ROOT, "docs/deploy.md"));
  for (const id of [
    "a-real-model-vllm-and-sglang-per-family",
    "gateway-workers-rlgate-serve---workers-n",
    "the-stores-disk",
  ])
    assert.ok(ids.has(id), id);
});
