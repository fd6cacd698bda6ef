// `rlgate serve --workers 2`: a pause taken on one worker holds calls on every worker (the primary relays the state),
// and the resume releases them all, served by the version it named.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, test } from "node:test";
import { startSim, type SimServer } from "../sim/index.ts";
import { createRollout, postJson, rolloutCalls, spawnCli, tempDir, until } from "./helpers.ts";

const CALLS = 8;
const dirs: string[] = [];
let sim: SimServer | null = null;
after(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  await sim?.close();
});

test("--workers 2: a pause holds calls on every worker until the resume", { timeout: 240_000 }, async () => {
  sim = await startSim({ port: 0 });
  const dir = tempDir("policy-workers");
  dirs.push(dir);
  const serve = spawnCli(["serve", "--workers", "2", "--port", "0", "--upstream", sim.url, "--data", dir]);
  try {
    await serve.waitFor(/listening on http:\/\/\S+/, 180_000);
    const url = serve.output().match(/listening on (http:\/\/\S+)/)![1]!;
    const paused = await postJson(`${url}/api/policy/pause`, { mode: "abort" });
    assert.equal(paused.status, 200, paused.text);
    const rollout = await createRollout(url, {});
    const generations = () => sim!.requests.filter((r) => r.path === "/v1/chat/completions").length;
    // Each call on a connection of its own: the primary hands connections round the workers.
    const calls = Array.from({ length: CALLS }, (_, i) =>
      fetch(`${url}/r/${rollout.id}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", connection: "close" },
        body: JSON.stringify({ model: "Qwen/Qwen3-8B", messages: [{ role: "user", content: `call ${i}` }] }),
      }).then(async (res) => ({ status: res.status, body: await res.text() })),
    );
    await until(
      async () => {
        const metrics = await (await fetch(`${url}/metrics`)).text();
        return new RegExp(`^rlgate_policy_holding_calls ${CALLS}$`, "m").test(metrics) ? true : undefined;
      },
      60_000,
      "every call held",
    );
    assert.equal(generations(), 0, "no worker let a call through while paused");
    const resumed = await postJson(`${url}/api/policy/resume`, { version: "7" });
    assert.equal(resumed.status, 200, resumed.text);
    for (const answer of await Promise.all(calls)) assert.equal(answer.status, 200, answer.body);
    assert.equal(generations(), CALLS);
    const records = await rolloutCalls(url, rollout.id);
    assert.equal(records.length, CALLS);
    for (const record of records) {
      assert.equal(record.policyVersion, "7", "every worker learned the version");
      assert.ok(record.policyUpdate!.heldMs! > 0);
    }
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /^rlgate_policy_pauses_total\{mode="abort"\} 1$/m);
    assert.match(metrics, new RegExp(`^rlgate_policy_held_calls_total ${CALLS}$`, "m"));
    assert.match(metrics, /^rlgate_policy_paused 0$/m);
  } finally {
    await serve.kill("SIGTERM");
  }
});
