// The walk's script (scripts/readme-walk/script.ts) run by bash on small pages: a serve block a later one replaces
// is stopped and not held against the walk, nor are the background blocks started since; a background block that exits with an error fails it; a failing block
// stops it there.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { freePort } from "../util/listen.ts";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";
import { shellBlocks } from "../scripts/readme-walk/blocks.ts";
import { walkScript } from "../scripts/readme-walk/script.ts";

/** A server on PORT that answers until it is stopped, or for 20 s (what the walk leaves running goes by itself). */
const serve = (port: number): string =>
  `node -e 'require("net").createServer((s) => s.end()).listen(${port}, "127.0.0.1"); setTimeout(process.exit, 20000)'`;

function walk(page: string): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), "walk-script-"));
  try {
    const script = join(dir, "walk.sh");
    writeFileSync(script, walkScript(shellBlocks("t.md", page)));
    const run = spawnSync("bash", [script], { env: { ...process.env, WALK_LOGS: dir }, encoding: "utf8" });
    return { status: run.status, output: `${run.stdout}${run.stderr}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("a serve block on a port a later one takes is stopped first, and the walk ends ok", async () => {
  const port = await freePort();
  const block = `<!-- walk: serve ${port} -->\n\`\`\`sh\n${serve(port)}\n\`\`\`\n`;
  const { status, output } = walk(`${block}\`\`\`sh\necho between\n\`\`\`\n${block}`);
  assert.equal(status, 0, output);
  assert.match(output, /between[\s\S]*walk: every block ran/);
});

test("a background block started after a server a later serve block replaces is stopped with it, not held against the walk", async () => {
  const port = await freePort();
  const server = `<!-- walk: serve ${port} -->\n\`\`\`sh\n${serve(port)}\n\`\`\`\n`;
  // A client that gives up (exit 3) once its server is gone, as the example trainer does when its core stops.
  const client = `while (exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null; do sleep 0.1; done; echo server gone; exit 3`;
  const page = `${server}<!-- walk: background -->\n\`\`\`sh\n${client}\n\`\`\`\n${server}\`\`\`sh\nsleep 1\n\`\`\`\n`;
  const { status, output } = walk(page);
  assert.equal(status, 0, output);
  assert.match(output, /walk: every block ran/);
});

test("a background block that exits with an error fails the walk, with its log", () => {
  const page = "<!-- walk: background -->\n```sh\necho trainer gave up; exit 3\n```\n```sh\nsleep 0.5\n```\n";
  const { status, output } = walk(page);
  assert.equal(status, 1);
  assert.match(output, /t\.md-2\.log exited 3; its log:\ntrainer gave up/);
  assert.doesNotMatch(output, /every block ran/);
});

test("a failing block stops the walk there", () => {
  const { status, output } = walk("```sh\nfalse\n```\n```sh\necho after\n```\n");
  assert.equal(status, 1);
  assert.doesNotMatch(output, /after/);
});
