// The store's announcements (what the live UI listens to): after the commit, and never at the write's expense.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import type { CallRecord } from "./records.ts";
import { Store } from "./store.ts";
import { testCallRecord, testRolloutRecord } from "./test-support.ts";

const rollout = testRolloutRecord({ id: "r1", key: "rlk_1", group: "g" });

test("rollouts and calls are announced once committed; a failing listener fails no write", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-store-events-"));
  const store = new Store({ path: dir });
  try {
    const seen: string[] = [];
    store.events.on("rollout", (r) => {
      // Announced after the commit: the record reads back.
      assert.equal(store.getRollout(r.id)?.status, r.status);
      seen.push(`rollout:${r.status}`);
    });
    store.events.on("call", (c: CallRecord) => {
      seen.push(`call:${c.seq}`);
      throw new Error("a listener that fails");
    });
    await store.putRollout(rollout);
    const call = testCallRecord({ seq: store.nextCallSeq(), rolloutId: "r1", promptTokenIds: [1, 2], choices: [] });
    await store.putCall(call); // resolves although the listener throws
    await store.finishRollout({ ...rollout, status: "ok", reward: 1, finishedAt: 2 });
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(seen, ["rollout:open", `call:${call.seq}`, "rollout:ok"]);
    assert.equal(store.countCalls("r1"), 1);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
