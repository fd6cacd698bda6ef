// A killed gateway loses nothing it acknowledged: SIGKILL the gateway process under concurrent streaming load, restart
// it on the same store, and every call whose response a client saw complete must be there, tokens included, and every
// finish it answered must still be a finish. The bounded run of `npm run test:reliability`'s kill test.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, test } from "node:test";
import { startSim, type SimServer } from "../sim/index.ts";
import { tempDir } from "./helpers.ts";
import { client, newAcknowledged, spawnGateway, verify } from "./reliability/load.ts";

let sim: SimServer;
const dataDir = tempDir("kill");
before(async () => {
  sim = await startSim({ port: 0, interTokenMs: 1 });
});
after(async () => {
  await sim.close();
  rmSync(dataDir, { recursive: true, force: true });
});

test(
  "SIGKILL during concurrent load loses no completed call and no acknowledged finish",
  { timeout: 180_000 },
  async () => {
    const first = await spawnGateway(sim.url, dataDir);
    const ack = newAcknowledged();
    let killed = false;
    const clients = Array.from({ length: 8 }, (_, i) =>
      client(
        () => first.url,
        i,
        ack,
        () => killed,
        3,
      ),
    );
    while (ack.calls.size < 60 || ack.finishes.size < 2) await new Promise((r) => setTimeout(r, 5));
    const firstExited = first.proc.kill("SIGKILL");
    killed = true;
    await Promise.all(clients);
    await firstExited;

    const second = await spawnGateway(sim.url, dataDir);
    try {
      const verified = await verify(second.url, ack);
      assert.deepEqual(verified.lostCalls, [], "completed calls missing after SIGKILL");
      assert.deepEqual(verified.unlisted, [], "rollouts whose calls could not be read back");
      assert.deepEqual(verified.brokenCalls, [], "completed calls stored without their tokens");
      assert.deepEqual(verified.lostFinishes, [], "acknowledged finishes lost");
      // New calls after the restart get numbers above every earlier one.
      const open = await fetch(`${second.url}/api/rollouts`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      const { id } = (await open.json()) as { id: string };
      const afterRestart = await fetch(`${second.url}/r/${id}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "after restart" }] }),
      });
      assert.equal(afterRestart.status, 200);
      assert.ok(Number(afterRestart.headers.get("x-rlgate-call")) > Math.max(...ack.calls.keys()));
    } finally {
      await second.proc.kill("SIGTERM");
    }
  },
);
