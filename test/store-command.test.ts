// `rlgate store backup` and `rlgate store stats` beside a serving gateway, and `serve --retain` with workers (the
// primary sweeps). Rollouts are played through the gateway against the built-in sim and read by an RL core's
// consumer that acknowledges each.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { TrajectoryConsumer } from "../clients/ts/index.ts";
import { Store } from "../store/store.ts";
import type { StoreStats } from "../store/store-stats.ts";
import {
  createRollout,
  playAgent,
  rolloutCalls,
  runCli,
  spawnCli,
  tempDir,
  until,
  type CliProcess,
} from "./helpers.ts";

async function serve(dataDir: string, extra: string[] = []): Promise<{ p: CliProcess; url: string; grpc: string }> {
  const p = spawnCli(["serve", "--port", "0", "--grpc-port", "0", "--data", dataDir, ...extra]);
  const [, grpc] = await p.waitFor(/trajectories:\s+grpc:\/\/(\S+)/, 60_000);
  const [, url] = p.output().match(/listening on (http:\/\/\S+)/)!;
  return { p, url: url!, grpc: grpc! };
}

/** A core's consumer that acknowledges every rollout it is sent. */
function ackingCore(address: string): { consumer: TrajectoryConsumer; acked: Set<string> } {
  const acked = new Set<string>();
  const consumer: TrajectoryConsumer = new TrajectoryConsumer({
    address,
    consumerGroup: "cores",
    member: "core-1",
    onRollout(m) {
      consumer.ack([m.cursor]);
      acked.add(m.rolloutId);
    },
  });
  consumer.start();
  return { consumer, acked };
}

async function playFinished(url: string, n: number, turns: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await createRollout(url, { group: `g${i}` });
    await playAgent(`${url}/r/${r.id}/v1`, turns, true);
    const res = await fetch(`${url}/api/rollouts/${r.id}/finish`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ reward: i % 2 }),
    });
    assert.equal(res.status, 200, await res.text());
    ids.push(r.id);
  }
  return ids;
}

test("store backup while serving reopens with every acknowledged call; store stats counts what the store holds", async () => {
  const dataDir = tempDir("store-cmd");
  const backupDir = join(tempDir("store-backup"), "copy");
  const { p, url, grpc } = await serve(dataDir, ["--workers", "1"]);
  const core = ackingCore(grpc);
  try {
    const ids = await playFinished(url, 6, 3);
    await until(() => (ids.every((id) => core.acked.has(id)) ? true : undefined), 30_000, "every rollout acknowledged");
    // A harness keeps calling while the copy is made: the gateway writes throughout.
    const live = await createRollout(url, { group: "live" });
    let writing = true;
    let liveCalls = 0;
    const writer = (async () => {
      while (writing) {
        await playAgent(`${url}/r/${live.id}/v1`, 1, true);
        liveCalls++;
      }
    })();
    await until(() => (liveCalls >= 2 ? true : undefined), 30_000, "live calls");
    const backup = await runCli(["store", "backup", backupDir, "--data", dataDir]);
    writing = false;
    await writer;
    assert.equal(backup.code, 0, backup.stderr);
    assert.match(
      backup.stderr,
      /backup: \S+data\.mdb, [\d.]+ [kMG]B \(compacted\), 7 rollouts, \d+ calls, in [\d.]+ s/,
    );

    const copy = new Store({ path: backupDir });
    try {
      for (const id of ids) {
        const served = await rolloutCalls(url, id);
        const copied = copy.listCalls(id);
        assert.equal(copied.length, 3, `${id}: every call in the copy`);
        assert.deepEqual(
          copied.map((c) => [c.seq, c.promptTokenIds, c.choices.map((ch) => ch.tokenIds)]),
          served.map((c) => [c.seq, c.promptTokenIds, c.choices.map((ch) => ch.tokenIds)]),
          `${id}: the copy's calls are the served ones`,
        );
        assert.equal(copy.getRollout(id)?.status, "ok");
      }
    } finally {
      await copy.close();
    }

    const stats = await runCli(["store", "stats", "--data", dataDir, "--retain", "0", "--json"]);
    assert.equal(stats.code, 0, stats.stderr);
    const s = JSON.parse(stats.stdout) as StoreStats;
    const calls = ids.length * 3 + (await rolloutCalls(url, live.id)).length;
    assert.deepEqual(s.rollouts, { open: 1, finished: 6 });
    assert.equal(s.calls.total, calls);
    assert.deepEqual(
      s.consumers.map((c) => [c.name, c.lag]),
      [["cores", 0]],
    );
    assert.deepEqual(
      { rollouts: s.retention!.rollouts, calls: s.retention!.calls, heldBy: s.retention!.heldBy },
      { rollouts: 6, calls: ids.length * 3, heldBy: null },
      "with a zero window, every acknowledged rollout would go",
    );
    assert.ok(s.bytes.live > 0 && s.bytes.live + s.bytes.free === s.bytes.used && s.bytes.used <= s.bytes.file);
    const text = await runCli(["store", "stats", "--data", dataDir, "--retain", "7d"]);
    assert.match(text.stdout, /rollouts: +1 open, 6 finished/);
    assert.match(text.stdout, new RegExp(`calls: +${calls}\\b`));
    assert.match(text.stdout, /cores +0 /);
    assert.match(text.stdout, /retention 7\.0d: would remove 0 rollout\(s\) with 0 call\(s\) now/);
  } finally {
    await core.consumer.close();
    await p.kill("SIGTERM");
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(join(backupDir, ".."), { recursive: true, force: true });
  }
});

test("serve --retain with workers: the primary removes acknowledged rollouts once past the window; open ones stay", async () => {
  const dataDir = tempDir("store-retain");
  const { p, url, grpc } = await serve(dataDir, ["--workers", "2", "--retain", "1s"]);
  const core = ackingCore(grpc);
  try {
    assert.match(p.output(), /retention: +rollouts finished over 1s ago and acknowledged by every consumer group/);
    const open = await createRollout(url, { group: "open" });
    await playAgent(`${url}/r/${open.id}/v1`, 2, true);
    const ids = await playFinished(url, 4, 2);
    await until(() => (ids.every((id) => core.acked.has(id)) ? true : undefined), 30_000, "every rollout acknowledged");
    await until(
      async () => {
        const gone = await Promise.all(ids.map(async (id) => (await fetch(`${url}/api/rollouts/${id}`)).status));
        return gone.every((status) => status === 404) ? true : undefined;
      },
      30_000,
      "acknowledged rollouts removed",
    );
    await p.waitFor(/retention: removed \d+ rollout\(s\)/);
    assert.equal((await rolloutCalls(url, open.id)).length, 2, "the open rollout keeps its calls");
    await playAgent(`${url}/r/${open.id}/v1`, 1, true);
    assert.equal((await rolloutCalls(url, open.id)).length, 3, "and takes more");
  } finally {
    await core.consumer.close();
    await p.kill("SIGTERM");
    rmSync(dataDir, { recursive: true, force: true });
  }
});
