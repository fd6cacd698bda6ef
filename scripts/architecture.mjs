#!/usr/bin/env node
// Draws the imports between rlgate's top-level folders (production code: tests and test support left out) as
// dependency-cruiser finds them, for docs/architecture.md. `npm run arch` prints it; `npm run arch -- --write`
// replaces the drawing in docs/architecture.md (between its markers). test/architecture.test.ts checks it is current.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const DOC = `${ROOT}docs/architecture.md`;
const START = "<!-- depcruise:start (npm run arch -- --write) -->";
const END = "<!-- depcruise:end -->";
/** Top down: a folder imports only folders below it. */
const FOLDERS = [
  "cli",
  "gateway",
  "rl-core",
  "runner",
  "sim",
  "replay",
  "clients",
  "trajectory",
  "store",
  "protocol",
  "tokenizer",
  "util",
  "ui",
];

export function folderEdges() {
  const folders = `^(${FOLDERS.join("|")})/`;
  const present = FOLDERS.filter((f) => existsSync(`${ROOT}${f}`));
  const out = execFileSync(
    process.execPath,
    [
      `${ROOT}node_modules/dependency-cruiser/bin/dependency-cruise.mjs`,
      "--config",
      ".dependency-cruiser.cjs",
      "--exclude",
      "(\\.test\\.ts$|/test-support\\.ts$|/test-helpers\\.ts$|/testing/|/fixtures/)",
      "--include-only",
      folders,
      "--collapse",
      folders,
      "--output-type",
      "text",
      ...present,
    ],
    { cwd: ROOT, encoding: "utf8" },
  );
  const edges = new Set();
  for (const line of out.split("\n")) {
    const m = /^([\w-]+)\/ → ([\w-]+)\/$/.exec(line.trim());
    if (m && m[1] !== m[2]) edges.add(`${m[1]} --> ${m[2]}`);
  }
  const rank = (edge) => edge.split(" --> ").map((f) => FOLDERS.indexOf(f));
  return [...edges].sort((a, b) => rank(a)[0] - rank(b)[0] || rank(a)[1] - rank(b)[1]);
}

export function drawing(edges) {
  return [START, "```mermaid", "flowchart TD", ...edges.map((e) => `  ${e}`), "```", END].join("\n");
}

export function currentDrawing() {
  const doc = readFileSync(DOC, "utf8");
  const start = doc.indexOf(START);
  const end = doc.indexOf(END);
  return start === -1 || end === -1 ? null : doc.slice(start, end + END.length);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const fresh = drawing(folderEdges());
  if (process.argv.includes("--write")) {
    const old = currentDrawing();
    const doc = readFileSync(DOC, "utf8");
    writeFileSync(DOC, old === null ? `${doc}\n${fresh}\n` : doc.replace(old, fresh));
  } else {
    console.log(fresh);
  }
}
