// Retention under a run: rollouts keep finishing, an RL core keeps acknowledging them, and the sweep removes what it
// acknowledged; the store's file stops growing once the window's worth of rollouts fills it (LMDB reuses the freed
// pages). The sweep is told the time (its clock is a parameter), so nothing here waits on a window to pass.
import assert from "node:assert/strict";
import { rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { TrajectoryConsumer } from "../clients/ts/index.ts";
import { RetentionSweep } from "../store/retention.ts";
import { putSyntheticRollout, startGrpcGateway } from "./grpc-helpers.ts";
import { tempDir, until } from "./helpers.ts";

const ROUNDS = 24;
const PER_ROUND = 12;
const WINDOW_MS = 1000;

test("with a core acknowledging and retention on, the store's file stays flat over many rollouts", async () => {
  const dataDir = tempDir("retention-flat");
  const gw = await startGrpcGateway({ dataDir });
  const store = gw.context.store;
  const consumer = new TrajectoryConsumer({
    address: gw.grpc!.address,
    consumerGroup: "cores",
    member: "core-1",
    onRollout(m) {
      consumer.ack([m.cursor]);
    },
  });
  consumer.start();
  const sweep = new RetentionSweep(store.tables(), WINDOW_MS);
  try {
    const file = () => statSync(join(dataDir, "data.mdb")).size;
    const highWater = () => (store.tables().root.getStats() as { lastPageNumber: number }).lastPageNumber;
    const sizes: Array<{ file: number; pages: number; rollouts: number }> = [];
    let removed = 0;
    for (let round = 0; round < ROUNDS; round++) {
      let last = 0;
      for (let k = 0; k < PER_ROUND; k++)
        last = await putSyntheticRollout(store, {
          id: `r${round}-${k}`,
          group: `g${round}-${k}`,
          reward: 1,
          turns: 4,
          promptTokens: 4000, // each call's prompt continues the last: ~16 kB of new tokens per call
          sampledTokens: 200,
        });
      await until(
        () => (gw.grpc!.stream.group("cores").persisted >= last ? true : undefined),
        20_000,
        `round ${round} acknowledged and written`,
      );
      // The clock the sweep is given puts this round's rollouts past the window.
      const swept = await sweep.sweep(Date.now() + WINDOW_MS + 1);
      removed += swept.rollouts;
      assert.equal(swept.rollouts, PER_ROUND, `round ${round}: every acknowledged rollout removed`);
      sizes.push({ file: file(), pages: highWater(), rollouts: store.listRollouts().length });
    }
    assert.equal(removed, ROUNDS * PER_ROUND);
    assert.equal(store.tables().calls.getCount(), 0);
    // After the first rounds, later rounds write into freed pages: over the last 20 rounds the high-water mark and the
    // file grow by less than a quarter of what one round alone took (without retention: 20 rounds' worth).
    const round = sizes[0]!;
    const settled = sizes[3]!;
    const end = sizes.at(-1)!;
    const growth = `pages at each round's end: ${sizes.map((s) => s.pages).join(" ")}; file ${settled.file} → ${end.file} bytes`;
    assert.ok(end.pages - settled.pages < round.pages / 4, growth);
    assert.ok(end.file - settled.file < round.file / 4, growth);
  } finally {
    await sweep.stop();
    await consumer.close();
    await gw.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
