// `rlgate serve --workers 2 --rollout-timeout …` as users run it: every worker sweeps the shared store for due
// rollouts, and still each rollout left open is finished once — one finished-log entry, one delivery on the stream,
// counted once in the summed /metrics.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, test } from "node:test";
import { TrajectoryConsumer } from "../clients/ts/index.ts";
import { createRollout, spawnCli, tempDir, until } from "./helpers.ts";

const ROLLOUTS = 12;
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

test(
  "--workers 2: rollouts left open are finished at --rollout-timeout exactly once",
  { timeout: 240_000 },
  async () => {
    const dir = tempDir("deadline-workers");
    dirs.push(dir);
    const serve = spawnCli([
      "serve",
      "--workers",
      "2",
      "--port",
      "0",
      "--grpc-port",
      "0",
      "--upstream",
      "http://127.0.0.1:9",
      "--data",
      dir,
      "--rollout-timeout",
      "1s",
    ]);
    const delivered: string[] = [];
    let consumer: TrajectoryConsumer | null = null;
    try {
      await serve.waitFor(/trajectories:\s+grpc:\/\/\S+/, 180_000);
      const url = serve.output().match(/listening on (http:\/\/\S+)/)![1]!;
      const grpc = serve.output().match(/trajectories:\s+grpc:\/\/(\S+)/)![1]!;
      const stream = new TrajectoryConsumer({
        address: grpc,
        member: "deadline-workers",
        onRollout(m) {
          delivered.push(m.rolloutId);
          stream.ack([m.cursor]);
        },
      });
      consumer = stream;
      stream.start();
      const ids = await Promise.all(
        Array.from({ length: ROLLOUTS }, async (_, i) => {
          const created = (await createRollout(url, { group: "g", round: 1 + (i % 3) })) as any;
          assert.equal(created.deadline_at, created.created_at + 1000);
          return created.id as string;
        }),
      );
      await until(() => (delivered.length >= ROLLOUTS ? true : undefined), 60_000, "every rollout on the stream");
      // Two more sweeps of each worker: nothing is finished again.
      await new Promise((r) => setTimeout(r, 2_500));
      assert.deepEqual([...delivered].sort(), [...ids].sort(), "each rollout delivered once");

      const listed = (await (await fetch(`${url}/api/rollouts?group=g`)).json()) as {
        rollouts: Array<{ status: string; reward: number | null; finish_cursor: number; metadata: any }>;
      };
      assert.equal(listed.rollouts.length, ROLLOUTS);
      for (const r of listed.rollouts) {
        assert.equal(r.status, "timeout");
        assert.equal(r.reward, null);
        assert.equal(r.metadata.finished_by, "deadline");
      }
      assert.equal(new Set(listed.rollouts.map((r) => r.finish_cursor)).size, ROLLOUTS);
      const metrics = await (await fetch(`${url}/metrics`)).text();
      assert.match(metrics, new RegExp(`^rlgate_rollouts_timed_out_total ${ROLLOUTS}$`, "m"));
    } finally {
      await consumer?.close();
      await serve.kill("SIGTERM");
    }
  },
);
