// A killed gateway loses nothing it acknowledged: SIGKILL the gateway process under concurrent load, restart it on
// the same store, and every call whose response the harness saw complete must be there, tokens included.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, test } from "node:test";
import { startSim, type SimServer } from "../sim/index.ts";
import type { CallRecord } from "../store/records.ts";
import { fromSnakeCase } from "../util/json-case.ts";
import { createRollout, spawnCli, tempDir, type CliProcess } from "./helpers.ts";

async function spawnGateway(upstream: string, dataDir: string): Promise<{ proc: CliProcess; url: string }> {
  const proc = spawnCli(["serve", "--upstream", upstream, "--port", "0", "--grpc-port", "0", "--data", dataDir]);
  const match = await proc.waitFor(/listening on (http:\/\/\S+)/);
  return { proc, url: match[1]! };
}

let sim: SimServer;
const dataDir = tempDir("kill");
before(async () => {
  sim = await startSim({ port: 0, interTokenMs: 1 });
});
after(async () => {
  await sim.close();
  rmSync(dataDir, { recursive: true, force: true });
});

test("SIGKILL during concurrent load loses no completed call", { timeout: 120_000 }, async () => {
  const first = await spawnGateway(sim.url, dataDir);
  const rollout = await createRollout(first.url, { group: "kill" });
  const completed = new Set<number>();
  let killed = false;

  async function worker(index: number): Promise<void> {
    for (let i = 0; !killed; i++) {
      const stream = (index + i) % 2 === 0;
      try {
        const res = await fetch(`${first.url}/r/${rollout.id}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ messages: [{ role: "user", content: `worker ${index} call ${i}` }], stream }),
        });
        const seq = Number(res.headers.get("x-rlgate-call"));
        const text = await res.text();
        // Complete means: a 200 whose body the harness read to its proper end.
        if (res.status === 200 && (!stream || text.trimEnd().endsWith("data: [DONE]"))) completed.add(seq);
      } catch {
        // Calls cut by the kill are not acknowledged: they may or may not be in the store.
      }
    }
  }

  const workers = Array.from({ length: 8 }, (_, i) => worker(i));
  while (completed.size < 60) await new Promise((r) => setTimeout(r, 5));
  const firstExited = first.proc.kill("SIGKILL");
  killed = true;
  await Promise.all(workers);
  await firstExited;

  const second = await spawnGateway(sim.url, dataDir);
  try {
    const res = await fetch(`${second.url}/api/rollouts/${rollout.id}/calls`);
    const { calls } = fromSnakeCase<{ calls: CallRecord[] }>(await res.json());
    const stored = new Map(calls.map((c) => [c.seq, c]));
    const lost = [...completed].filter((seq) => !stored.has(seq));
    assert.deepEqual(lost, [], `completed calls missing after SIGKILL: ${lost.join(", ")}`);
    for (const seq of completed) {
      const call = stored.get(seq)!;
      assert.equal(call.status, "ok");
      assert.ok(call.promptTokenIds!.length > 0);
      assert.ok(call.choices[0]!.tokenIds.length > 0);
    }
    // New calls after the restart get numbers above every earlier one.
    const after = await fetch(`${second.url}/r/${rollout.id}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "after restart" }] }),
    });
    assert.equal(after.status, 200);
    assert.ok(Number(after.headers.get("x-rlgate-call")) > Math.max(...stored.keys()));
  } finally {
    await second.proc.kill("SIGTERM");
  }
});
