// Two RL cores share one gateway's trajectory stream (one consumer group), each holding groups in progress,
// when the gateway is killed -9 and restarted; one core is back at once, the other restarts and comes back
// later. The cores claim what they hold when they resubscribe (and the restarted gateway holds back what the
// late one may hold), so every group is still trained whole by one core, and no rollout is missing or
// trained twice.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, test } from "node:test";
import { TrainerClient } from "../clients/ts/index.ts";
import { startCore, type Core } from "../rl-core/core/index.ts";
import { putSyntheticRollout, restartableGateway, startGrpcGateway } from "./grpc-helpers.ts";
import { createRollout, postJson, tempDir, until, type CliProcess } from "./helpers.ts";

const GROUPS = 6;
const SIZE = 3;
const gatewayDir = tempDir("cg-restart-gw");
const coreDirs = [tempDir("cg-restart-core0"), tempDir("cg-restart-core1")];
const procs: CliProcess[] = [];
const cores: Core[] = [];
const clients: TrainerClient[] = [];
after(async () => {
  for (const c of clients) c.close();
  for (const c of cores) await c.close();
  for (const p of procs) await p.kill();
  for (const dir of [gatewayDir, ...coreDirs]) rmSync(dir, { recursive: true, force: true });
});

test("gateway killed mid-stream with two cores: each group trained whole by one core, none missing or twice", { timeout: 150_000 }, async () => {
  const { url: gatewayUrl, grpcPort, start: startGatewayProc } = await restartableGateway(gatewayDir, procs);
  let gateway = await startGatewayProc();

  const startMyCore = (i: number) =>
    startCore({
      gateways: [`127.0.0.1:${grpcPort}`],
      port: 0,
      metricsPort: null,
      dataDir: coreDirs[i]!,
      member: `core${i}`,
      groupSize: SIZE,
      // Long enough that no group completes by timeout during the test: a split group would show up as a
      // partial group still pending at the end.
      groupTimeoutMs: 60_000,
      batchTimeoutMs: 100,
      leaseTimeoutMs: 3000,
    });
  for (const i of [0, 1]) cores[i] = await startMyCore(i);

  // A trainer per core (following it across its restart): which rollouts (and groups) each core trained.
  const trained = cores.map(() => [] as Array<{ rolloutId: string; group: string }>);
  const ac = new AbortController();
  const trainers = [0, 1].map(async (i) => {
    while (!ac.signal.aborted) {
      const client = new TrainerClient(cores[i]!.address, { deadlineMs: 5000 });
      clients.push(client);
      try {
        for await (const b of client.batches({ signal: ac.signal, maxInFlight: 2 })) {
          trained[i]!.push(...b.rowInfo.map((r) => ({ rolloutId: r.rolloutId, group: r.group })));
          await client.ack([b.batchId]);
        }
      } catch {
        await new Promise((r) => setTimeout(r, 100)); // the core restarted
      }
    }
  });

  // Every group's rollouts exist and have made their call; two of each finish before the kill, the last after.
  const groups = Array.from({ length: GROUPS }, (_, g) => `grp-${g}`);
  const members = new Map<string, string[]>();
  for (const group of groups) {
    const ids: string[] = [];
    for (let k = 0; k < SIZE; k++) {
      const r = await createRollout(gatewayUrl, { group, harness: "sim" });
      const res = await postJson(`${r.base_urls.openai}/chat/completions`, { messages: [{ role: "user", content: `${group} ${k}` }] });
      assert.equal(res.status, 200, res.text);
      ids.push(r.id);
    }
    members.set(group, ids);
  }
  const finish = async (id: string, reward: number) => assert.equal((await postJson(`${gatewayUrl}/api/rollouts/${id}/finish`, { reward })).status, 200);
  for (let k = 0; k < SIZE - 1; k++) {
    for (const group of groups) {
      await finish(members.get(group)![k]!, k);
      await new Promise((r) => setTimeout(r, 30)); // lets both cores' sessions take turns
    }
  }
  const received = () => cores.reduce((n, c) => n + c.status().rolloutsReceived, 0);
  await until(() => (received() >= GROUPS * (SIZE - 1) ? true : undefined), 30_000, "both cores holding groups in progress");
  const holding = cores.map((c) => c.status().groupsPending);
  assert.ok(holding.every((n) => n > 0), `both cores hold groups in progress (${holding.join(", ")})`);

  await gateway.kill("SIGKILL"); // leases are in memory: gone
  await cores[1]!.close(); // its groups in progress stay in its store, unacked
  gateway = await startGatewayProc();
  await until(() => (cores[0]!.status().gatewaysConnected[0] ? true : undefined), 30_000, "core0 back");
  await new Promise((r) => setTimeout(r, 500)); // core0 reads the re-delivered backlog first
  cores[1] = await startMyCore(1);
  for (const group of groups) await finish(members.get(group)![SIZE - 1]!, SIZE - 1);

  const expected = [...members.values()].flat();
  const all = () => trained.flat().map((t) => t.rolloutId);
  await until(() => (new Set(all()).size >= expected.length ? true : undefined), 60_000, `${expected.length} rollouts trained`);
  await new Promise((r) => setTimeout(r, 500)); // anything trained twice would show up now
  ac.abort();
  await Promise.all(trainers);
  // A rollout also held by the other core would sit there as part of a pending group, trained at its timeout.
  const leftover = cores.map((c) => c.status().groupsPending);
  assert.deepEqual(leftover, [0, 0], "no core still holds part of a group (a split, or a rollout held twice)");

  assert.deepEqual([...new Set(all())].sort(), [...expected].sort(), "no rollout missing");
  assert.equal(all().length, new Set(all()).size, "no rollout trained twice");
  for (const group of groups) {
    const by = trained.map((list) => list.filter((t) => t.group === group).length);
    assert.ok(by.includes(SIZE) && by.includes(0), `group ${group} whole at one core (per core: ${by.join(", ")})`);
  }
  console.log(
    `  ${GROUPS} groups of ${SIZE}; before the kill the cores held ${holding.join(" + ")} groups; trained ` +
      `${trained.map((t) => t.length).join(" + ")} rollouts; duplicates skipped: ${cores.map((c) => c.status().rolloutsDuplicate).join(" + ")}`,
  );
});

test("a core back after its rollouts went to another core drops them: the group is trained whole there", { timeout: 60_000 }, async () => {
  const dirs = [tempDir("cg-late-core0"), tempDir("cg-late-core1"), tempDir("cg-late-gw")];
  const gw = await startGrpcGateway({ dataDir: dirs[2] });
  const logs: string[] = [];
  const start = (i: number) =>
    startCore({
      gateways: [gw.grpc!.address],
      port: 0,
      metricsPort: null,
      dataDir: dirs[i]!,
      member: `late${i}`,
      groupSize: 3,
      groupTimeoutMs: 60_000,
      batchTimeoutMs: 100,
      log: (line) => logs.push(`core${i}: ${line}`),
    });
  const put = (id: string) => putSyntheticRollout(gw.context.store, { id, group: "G", reward: 1 });
  try {
    let late = await start(1);
    await put("g-0");
    await put("g-1");
    await until(() => (late.status().rolloutsReceived === 2 ? true : undefined), 10_000, "core1 holds G");
    const other = await start(0);
    await late.close(); // its session ends: G's two rollouts go to core0
    await until(() => (other.status().rolloutsReceived === 2 ? true : undefined), 10_000, "re-delivered to core0");
    late = await start(1); // claims G's two rollouts from its store: rejected, dropped
    await until(() => (late.status().groupsPending === 0 ? true : undefined), 10_000, "core1 dropped them");
    await put("g-2");
    const client = new TrainerClient(other.address, { deadlineMs: 5000 });
    const ac = new AbortController();
    const rows: string[] = [];
    for await (const b of client.batches({ signal: ac.signal })) {
      rows.push(...b.rowInfo.map((r) => r.rolloutId));
      await client.ack([b.batchId]);
      if (rows.length >= 3) ac.abort();
    }
    client.close();
    assert.deepEqual(rows.sort(), ["g-0", "g-1", "g-2"]);
    assert.equal(late.status().rolloutsReceived, 0, "nothing of G reached core1 again");
    assert.ok(logs.some((l) => /core1: .*gave 2 rollouts held here to another core/.test(l)), logs.join("\n"));
    await late.close();
    await other.close();
  } finally {
    await gw.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
});
