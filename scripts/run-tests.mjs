#!/usr/bin/env node
// Runs every *.test.ts under the project's source folders with node:test through tsx.
// Node 20's `--test` takes no glob patterns, so the files are collected here.
// Usage: node scripts/run-tests.mjs [filter...]   (filters are substrings of test file paths)
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { spawnSync } from "node:child_process";

const ROOTS = [
  "util",
  "cli",
  "protocol",
  "clients",
  "gateway",
  "sim",
  "store",
  "tokenizer",
  "trajectory",
  "rl-core",
  "runner",
  "replay",
  "ui",
  "test",
];
const root = new URL("..", import.meta.url).pathname;
const filters = process.argv.slice(2);

function collect(dir, out) {
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of entries) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) collect(path, out);
    else if (name.endsWith(".test.ts")) out.push(relative(root, path));
  }
}

const files = [];
for (const r of ROOTS) collect(join(root, r), files);
const selected = files.filter((f) => filters.length === 0 || filters.some((x) => f.includes(x))).sort();
if (selected.length === 0) {
  console.error(`no test files match ${filters.join(" ")}`);
  process.exit(1);
}
const concurrency = process.env.RLGATE_TEST_CONCURRENCY ?? "2";
const result = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", `--test-concurrency=${concurrency}`, "--test-reporter=spec", ...selected],
  { stdio: "inherit", cwd: root },
);
process.exit(result.status ?? 1);
