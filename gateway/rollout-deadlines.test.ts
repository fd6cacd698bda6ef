// The deadline sweeper over a shared store, as `serve --workers N` runs it: two processes' sweeps racing on the same
// due rollouts finish each once (the store's idempotent finish decides), and a stale deadline entry finishes nothing.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, test } from "node:test";
import type { RolloutRecord } from "../store/records.ts";
import { Store } from "../store/store.ts";
import { silentLogger } from "../util/log.ts";
import { GatewayMetrics } from "./metrics.ts";
import { RolloutDeadlines } from "./rollout-deadlines.ts";

const HOUR = 3_600_000;
const tempDir = (prefix: string) => mkdtempSync(join(tmpdir(), `rlgate-${prefix}-`));
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function open(id: string, deadlineAt: number | null): RolloutRecord {
  return {
    id,
    key: `rlk_${id}`,
    group: "g",
    task: null,
    harness: null,
    metadata: { sample: id },
    round: 2,
    deadlineAt,
    status: "open",
    reward: null,
    createdAt: 1,
    finishedAt: null,
  };
}

/** A store and its sweeper as one worker of `slots` has them (timer far off: sweeps are run by hand). */
function worker(dir: string, slot: number, slots: number) {
  const store = new Store({ path: dir, shared: { slot, slots } });
  const metrics = new GatewayMetrics();
  const deadlines = new RolloutDeadlines({ store, metrics, log: silentLogger }, HOUR);
  cleanups.push(async () => {
    await deadlines.close();
    await store.close();
  });
  return { store, metrics, deadlines };
}

async function timedOut(metrics: GatewayMetrics): Promise<number> {
  return (await metrics.rolloutsTimedOut.get()).values[0]?.value ?? 0;
}

test("two workers sweeping the same due rollouts at once finish each exactly once", async () => {
  const dir = tempDir("deadlines-race");
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const a = worker(dir, 0, 2);
  const b = worker(dir, 1, 2);
  const ids = Array.from({ length: 20 }, (_, i) => `r${i}`);
  for (const id of ids) assert.ok(await a.store.putNewRollout(open(id, 1_000)));
  assert.ok(await a.store.putNewRollout(open("later", 9_000)));
  assert.ok(await a.store.putNewRollout(open("never", null)));

  const [byA, byB] = await Promise.all([a.deadlines.sweep(5_000), b.deadlines.sweep(5_000)]);
  assert.equal(byA + byB, ids.length);
  assert.equal((await timedOut(a.metrics)) + (await timedOut(b.metrics)), ids.length);

  b.store.refreshReads();
  const log = b.store.finishedAfter(0, 1000).map((e) => e.rolloutId);
  assert.deepEqual([...log].sort(), [...ids].sort(), "each in the finished log once; 'later' and 'never' not yet");
  const r = b.store.getRollout("r3")!;
  assert.equal(r.status, "timeout");
  assert.equal(r.reward, null);
  assert.equal(r.finishedAt, 5_000);
  assert.deepEqual(r.metadata, { sample: "r3", finished_by: "deadline" });
  assert.equal(r.round, 2, "the record is kept as it was, finished");
  assert.deepEqual(
    b.store.dueRollouts(5_000).map((d) => d.rolloutId),
    [],
    "the finishes dropped their deadlines",
  );
  assert.equal(await a.deadlines.sweep(8_999), 0);
  assert.equal(await b.deadlines.sweep(9_000), 1, "due at its deadline's millisecond");
  assert.equal(b.store.getRollout("never")!.status, "open");
});

test("a stale deadline entry (the rollout re-put with another deadline) finishes nothing and is dropped", async () => {
  const dir = tempDir("deadlines-stale");
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const { store, deadlines } = worker(dir, 0, 1);
  await store.putRollout(open("moved", 1_000));
  await store.putRollout(open("moved", 10_000));
  assert.deepEqual(
    store.dueRollouts(5_000).map((d) => d.deadlineAt),
    [1_000],
  );
  assert.equal(await deadlines.sweep(5_000), 0);
  assert.deepEqual(store.dueRollouts(5_000), []);
  assert.equal(store.getRollout("moved")!.status, "open");
  assert.equal(await deadlines.sweep(10_000), 1);
  assert.equal(store.getRollout("moved")!.status, "timeout");
});
