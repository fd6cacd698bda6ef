// `rlgate show` on a branch: a line names its backbone and point and marks the calls answered from the backbone's
// recording, so their "0 tok" does not read as failed calls. A real branch, made through the control API.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { after, before, test } from "node:test";
import { AGENT_SCRIPT, createRollout, playAgent, postJson, startStack, type Stack } from "../test/helpers.ts";

let stack: Stack;
before(async () => {
  stack = await startStack({ sim: { script: AGENT_SCRIPT } });
});
after(() => stack.close());

/** The CLI in a child process, without blocking this one's event loop (the gateway it reads runs here). */
function show(id: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const args = ["--import", "tsx", new URL("./index.ts", import.meta.url).pathname, "show", id];
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...args, "--gateway", stack.gateway.url],
      { timeout: 300_000 },
      (error, stdout, stderr) =>
        resolve({ status: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test("a branch says whose, where, and which calls were replayed; a backbone says nothing of the kind", async () => {
  const url = stack.gateway.url;
  const backbone = await createRollout(url, {});
  await playAgent(backbone.base_urls.openai, 2, true);
  assert.equal((await postJson(`${url}/api/rollouts/${backbone.id}/finish`, { reward: 1 })).status, 200);
  const branch = await createRollout(url, { branch: { of: backbone.id, at_call: 1 } });
  await playAgent(branch.base_urls.openai, 2, true);
  const out = await show(branch.id);
  assert.equal(out.status, 0, out.stderr);
  const line = out.stdout.split("\n")[1]!;
  assert.match(
    line,
    new RegExp(
      `^branch of ${backbone.id} at call 1: 1 of its 2 calls replayed from the backbone's recording \\(#\\d+: no upstream call`,
    ),
  );
  const plain = await show(backbone.id);
  assert.equal(plain.status, 0, plain.stderr);
  assert.doesNotMatch(plain.stdout, /^branch of/m);
  // The link that opens it in the gateway's live UI.
  assert.equal(plain.stdout.split("\n")[1], `in the UI: ${url}/ui/#rollout=${backbone.id}`);
});

test("an unknown rollout id: one sentence, exit 1, no stack trace", async () => {
  const out = await show("r_unknown");
  assert.equal(out.status, 1);
  assert.match(out.stderr.trim(), /^rlgate show: [^\n]+$/);
});
