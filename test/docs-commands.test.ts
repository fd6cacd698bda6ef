// The docs' shell blocks run rlgate one way, `npx rlgate …`: a checkout has no `rlgate` on PATH (npm link or a package
// install puts it there), so a bare `rlgate serve` pasted from a page fails with "command not found"; and the other
// spellings that work (`npx tsx cli/index.ts`, `node bin/rlgate.js`) would make a reader wonder which to use.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { shellBlocks } from "../scripts/readme-walk/blocks.ts";
import { ROOT } from "../scripts/working-tree-copy.ts";

const PAGES = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];
const SUB_COMMAND = "(?:serve|sim|show|core|run|replay|export|store|doctor|harness-check)(?:\\s|$)";
/** `rlgate <sub-command>` where a command starts: a line's start, after env assignments (not `X=$(npx rlgate …`, whose
 *  command substitution the `$(` case reads), `&&`, `;`, `|`, `$(`. */
const BARE = new RegExp(`(?:^|&&|;|\\||\\$\\(|^\\s*(?:[A-Z_][A-Z0-9_]*=(?!\\$\\()\\S+\\s+)+)\\s*rlgate ${SUB_COMMAND}`);
/** The CLI run another way than npx rlgate. */
const OTHER_SPELLING = new RegExp(`(?:tsx cli/index\\.ts|node bin/rlgate\\.js) ${SUB_COMMAND}`);

test("every shell block in README.md and docs/ runs rlgate as npx rlgate", () => {
  const bare: string[] = [];
  for (const page of PAGES) {
    for (const block of shellBlocks(page, readFileSync(join(ROOT, page), "utf8"))) {
      block.text.split("\n").forEach((line, i) => {
        if (BARE.test(line) || OTHER_SPELLING.test(line)) bare.push(`${page}:${block.line + 1 + i}: ${line.trim()}`);
      });
    }
  }
  assert.deepEqual(bare, []);
});

test("the README's test command is the one CI runs (.ci/run's last line)", () => {
  const ci = readFileSync(join(ROOT, ".ci/run"), "utf8").trim().split("\n").at(-1)!.trim();
  const readme = shellBlocks("README.md", readFileSync(join(ROOT, "README.md"), "utf8"));
  assert.ok(
    readme.some((block) => block.text.split("\n").some((line) => line.replace(/\s+#.*$/, "").trim() === ci)),
    `README.md has no shell line '${ci}'`,
  );
});
