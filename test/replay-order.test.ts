// Issue 22, item 2: replay follows the gateway's finished log. Rollouts finished in the same millisecond (27 of 48 did
// in the report) are read, and copied into a replay snapshot, in the order of their finish cursors — the order the
// live stream delivered them — whether read from the store or from a gateway's control API.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { openSource, type RolloutSource } from "../replay/source.ts";
import { writeSnapshot } from "../replay/snapshot.ts";
import type { RolloutRecord } from "../store/records.ts";
import { Store } from "../store/store.ts";
import { startGrpcGateway } from "./grpc-helpers.ts";
import { tempDir } from "./helpers.ts";
import type { Gateway } from "../gateway/index.ts";

const ROLLOUTS = 48;
const SAME_MS = 1_796_000_000_000;

/**
 * Finishes ROLLOUTS rollouts, all stamped with one finished_at, in an order that is neither their ids' nor their
 * creation's (a fixed shuffle): the finished log is the only record of it. Resolves with the ids in finish order.
 */
async function finishInOneMillisecond(store: Store): Promise<string[]> {
  const ids = Array.from({ length: ROLLOUTS }, (_, i) => `r-${String(i).padStart(2, "0")}`);
  for (const [i, id] of ids.entries()) {
    await store.putRollout({
      id,
      key: `rlk_${id}`,
      group: "g",
      task: null,
      harness: null,
      metadata: {},
      status: "open",
      reward: null,
      createdAt: SAME_MS - 1000 + i,
      finishedAt: null,
    });
  }
  const order = ids.map((id, i) => ({ id, k: (i * 29 + 7) % ROLLOUTS })).sort((a, b) => a.k - b.k);
  const finished = order.map(({ id }) => id);
  // Concurrently, as many finishes arriving at once: the log still draws one cursor each, in commit order.
  const cursors = await Promise.all(
    finished.map((id) =>
      store.finishRollout({ ...store.getRollout(id)!, status: "ok", reward: 1, finishedAt: SAME_MS }),
    ),
  );
  const byCursor = finished.map((id, i) => ({ id, cursor: cursors[i]! })).sort((a, b) => a.cursor - b.cursor);
  return byCursor.map(({ id }) => id);
}

async function snapshotOrder(source: RolloutSource, rollouts: RolloutRecord[], dir: string): Promise<string[]> {
  await writeSnapshot(source, rollouts, dir);
  const snapshot = new Store({ path: dir });
  try {
    return snapshot.finishedAfter(0, 1000).map((e) => e.rolloutId);
  } finally {
    await snapshot.close();
  }
}

describe("item 2: replay orders by the finished-log cursor", () => {
  const dirs: string[] = [];
  const dir = (prefix: string) => {
    const d = tempDir(prefix);
    dirs.push(d);
    return d;
  };
  let gateway: Gateway;
  let logOrder: string[];
  before(async () => {
    gateway = await startGrpcGateway({ grpcPort: null, dataDir: dir("order-gw") });
    logOrder = await finishInOneMillisecond(gateway.context.store);
    // The case the report found: one finished_at for all, and a log order that is not the ids' order.
    assert.notDeepEqual(logOrder, [...logOrder].sort());
  });
  after(async () => {
    await gateway?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test("read from the store: selected and snapshotted in finish-cursor order", async () => {
    const source = await openSource({ data: gateway.context.store.path });
    try {
      const selected = await source.select({ group: "g" });
      assert.deepEqual(
        selected.map((r) => r.id),
        logOrder,
      );
      assert.deepEqual(await snapshotOrder(source, selected, dir("order-snap-store")), logOrder);
    } finally {
      await source.close();
    }
  });

  test("read from a gateway's control API (finish_cursor on each rollout): the same order", async () => {
    const listed = (await (await fetch(`${gateway.url}/api/rollouts?group=g`)).json()) as {
      rollouts: Array<{ id: string; finish_cursor: number | null; key?: string }>;
    };
    assert.ok(listed.rollouts.every((r) => typeof r.finish_cursor === "number" && r.key === undefined));
    const source = await openSource({ gateway: gateway.url });
    const selected = await source.select({ since: SAME_MS });
    assert.deepEqual(
      selected.map((r) => r.id),
      logOrder,
    );
    assert.deepEqual(await snapshotOrder(source, selected, dir("order-snap-gw")), logOrder);
  });

  test("open rollouts (no cursor) come after finished ones, by creation", async () => {
    const store = gateway.context.store;
    const open = (id: string, createdAt: number): RolloutRecord => ({
      id,
      key: `rlk_${id}`,
      group: "g-open",
      task: null,
      harness: null,
      metadata: {},
      status: "open",
      reward: null,
      createdAt,
      finishedAt: null,
    });
    await store.putRollout(open("b-open", 2));
    await store.putRollout(open("a-open", 3));
    await store.putRollout({ ...open("z-done", 1) });
    await store.finishRollout({ ...open("z-done", 1), status: "ok", reward: 0, finishedAt: 5 });
    const source = await openSource({ gateway: gateway.url });
    const selected = await source.select({ group: "g-open", finishedOnly: false });
    assert.deepEqual(
      selected.map((r) => r.id),
      ["z-done", "b-open", "a-open"],
    );
  });
});
