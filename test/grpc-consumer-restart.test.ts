// Two RL cores share one gateway's trajectory stream (one consumer group). One core has just trained whole groups
// (acked above the committed cursor, which a group still in progress holds back) and holds groups in progress;
// the other holds groups in progress too. The gateway is killed -9 right after those acks, and the first core
// restarts and comes back only after more than the old 5 s rejoin grace. The gateway kept each core's leases and
// groups (persisted) for it, so every group is still trained whole by one core, and no rollout is missing or
// trained twice: what the late core had trained goes back only to it (it skips it as seen: its acks may have been
// lost with both processes), and what it holds waits for it.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, test } from "node:test";
import { TrainerClient } from "../clients/ts/index.ts";
import { startCore, type Core } from "../rl-core/core/index.ts";
import { putSyntheticRollout, restartableGateway, startGrpcGateway } from "./grpc-helpers.ts";
import { createRollout, postJson, tempDir, until, type CliProcess } from "./helpers.ts";

const SIZE = 3;
/** The old rejoin grace (5 s) and some: the late core is back after this. */
const LATE_MS = 5_500;
const gatewayDir = tempDir("cg-restart-gw");
const coreDirs = [tempDir("cg-restart-core0"), tempDir("cg-restart-core1")];
const procs: CliProcess[] = [];
const cores: Core[] = [];
const clients: TrainerClient[] = [];
/** Stops the trainers (also when the test fails). */
const ac = new AbortController();
after(async () => {
  ac.abort();
  for (const c of clients) c.close();
  for (const c of cores) await c?.close();
  for (const p of procs) await p.kill();
  for (const dir of [gatewayDir, ...coreDirs]) rmSync(dir, { recursive: true, force: true });
});

test(
  "gateway killed -9 and a core restarted after the old rejoin grace: each group trained whole by one core, none missing or twice",
  { timeout: 180_000 },
  async () => {
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

    // A trainer per core (following it across its restart): which rollouts (and groups) each core trained, by batch
    // (a batch whose ack the core had not committed when it closed is served again after its restart: counted once).
    type Row = { rolloutId: string; group: string };
    const batches = [0, 1].map(() => new Map<number, Row[]>());
    const trainedBy = (i: number): Row[] => [...batches[i]!.values()].flat();
    const trainers: Array<Promise<void>> = [];
    const train = (i: number) =>
      trainers.push(
        (async () => {
          while (!ac.signal.aborted) {
            const core = cores[i];
            if (!core) {
              await new Promise((r) => setTimeout(r, 100));
              continue;
            }
            const client = new TrainerClient(core.address, { deadlineMs: 5000 });
            clients.push(client);
            try {
              for await (const b of client.batches({ signal: ac.signal, maxInFlight: 2 })) {
                batches[i]!.set(
                  b.batchId,
                  b.rowInfo.map((r) => ({ rolloutId: r.rolloutId, group: r.group })),
                );
                await client.ack([b.batchId]);
              }
            } catch {
              await new Promise((r) => setTimeout(r, 100)); // the core restarted
            }
          }
        })(),
      );

    // Every rollout exists and has made its call up front; they finish in phases.
    const members = new Map<string, string[]>();
    const prepare = async (group: string) => {
      const ids: string[] = [];
      for (let k = 0; k < SIZE; k++) {
        const r = await createRollout(gatewayUrl, { group, harness: "sim" });
        const res = await postJson(`${r.base_urls.openai}/chat/completions`, {
          messages: [{ role: "user", content: `${group} ${k}` }],
        });
        assert.equal(res.status, 200, res.text);
        ids.push(r.id);
      }
      members.set(group, ids);
    };
    const held1 = ["q0", "q1"]; // in progress at core1
    const done1 = ["d0", "d1", "d2"]; // trained by core1 just before the kill
    const split = ["p0", "p1", "p2", "p3"]; // in progress, at either core
    for (const group of [...held1, ...done1, ...split]) await prepare(group);
    const finish = async (id: string, reward: number) =>
      assert.equal((await postJson(`${gatewayUrl}/api/rollouts/${id}/finish`, { reward })).status, 200);
    const finishFirst = async (groups: string[], n: number) => {
      for (let k = 0; k < n; k++) {
        for (const group of groups) {
          await finish(members.get(group)![k]!, k);
          await new Promise((r) => setTimeout(r, 30)); // lets both cores' sessions take turns
        }
      }
    };
    const received = () => cores.reduce((n, c) => n + (c?.status().rolloutsReceived ?? 0), 0);

    // core1 alone: five groups in progress (the first rollouts hold the committed cursor back).
    cores[1] = await startMyCore(1);
    train(1);
    await finishFirst([...held1, ...done1], SIZE - 1);
    await until(
      () => (received() === (held1.length + done1.length) * (SIZE - 1) ? true : undefined),
      30_000,
      "core1 holding its groups",
    );
    // core0 joins: the next groups in progress go to either core.
    cores[0] = await startMyCore(0);
    train(0);
    await until(() => (cores[0]!.status().gatewaysConnected[0] ? true : undefined), 30_000, "core0 connected");
    await finishFirst(split, SIZE - 1);
    await until(
      () => (received() === (held1.length + done1.length + split.length) * (SIZE - 1) ? true : undefined),
      30_000,
      "the cores holding groups in progress",
    );
    const holding = cores.map((c) => c!.status().groupsPending);
    // core1 completes three of its groups (acked above the committed cursor), and the gateway dies right after.
    for (const group of done1) await finish(members.get(group)![SIZE - 1]!, SIZE - 1);
    await until(
      () => (cores[1]!.status().groupsDone === done1.length ? true : undefined),
      30_000,
      "core1 trained three groups",
    );
    await gateway.kill("SIGKILL");
    await cores[1]!.close(); // what it holds stays in its store, unacked; acks the gateway did not confirm are forgotten
    cores[1] = undefined as unknown as Core;
    gateway = await startGatewayProc();
    await until(() => (cores[0]!.status().gatewaysConnected[0] ? true : undefined), 30_000, "core0 back");
    await new Promise((r) => setTimeout(r, LATE_MS));
    assert.equal(trainedBy(0).length, 0, "nothing of core1's went to core0 while core1 was away");
    cores[1] = await startMyCore(1);
    for (const group of [...held1, ...split]) await finish(members.get(group)![SIZE - 1]!, SIZE - 1);

    const expected = [...members.values()].flat();
    const trained = () => [trainedBy(0), trainedBy(1)];
    const all = () =>
      trained()
        .flat()
        .map((t) => t.rolloutId);
    await until(
      () => (new Set(all()).size >= expected.length ? true : undefined),
      30_000,
      `${expected.length} rollouts trained`,
    );
    await new Promise((r) => setTimeout(r, 500)); // anything trained twice would show up now
    ac.abort();
    await Promise.all(trainers);
    // A rollout also held by the other core would sit there as part of a pending group, trained at its timeout.
    const leftover = cores.map((c) => c.status().groupsPending);
    assert.deepEqual(leftover, [0, 0], "no core still holds part of a group (a split, or a rollout held twice)");

    assert.deepEqual([...new Set(all())].sort(), [...expected].sort(), "no rollout missing");
    const where = new Map<string, string[]>();
    batches.forEach((byId, i) =>
      byId.forEach((rows, id) =>
        rows.forEach((r) =>
          where.set(r.rolloutId, [...(where.get(r.rolloutId) ?? []), `${r.group} core${i} batch ${id}`]),
        ),
      ),
    );
    const twice = [...where.values()].filter((w) => w.length > 1).map((w) => w.join(" and "));
    assert.equal(
      all().length,
      new Set(all()).size,
      `no rollout trained twice (${all().length} rows for ${expected.length} rollouts: ${twice.join("; ")})`,
    );
    for (const group of members.keys()) {
      const by = trained().map((list) => list.filter((t) => t.group === group).length);
      assert.ok(by.includes(SIZE) && by.includes(0), `group ${group} whole at one core (per core: ${by.join(", ")})`);
    }
    for (const group of [...held1, ...done1])
      assert.equal(trainedBy(1).filter((t) => t.group === group).length, SIZE, `${group} trained by core1`);
    console.log(
      `  ${members.size} groups of ${SIZE}; the cores held ${holding.join(" + ")} groups in progress, then core1 trained ` +
        `${done1.length} just before the kill; trained ${trained()
          .map((t) => t.length)
          .join(" + ")} rollouts; ` +
        `sent again to the restarted core1 (acks lost) and skipped: ${cores[1]!.status().rolloutsDuplicate}`,
    );
  },
);

test(
  "a core back after its rollouts went to another core drops them: the group is trained whole there",
  { timeout: 60_000 },
  async () => {
    const dirs = [tempDir("cg-late-core0"), tempDir("cg-late-core1"), tempDir("cg-late-gw")];
    const gw = await startGrpcGateway({ dataDir: dirs[2], grpcMemberTimeoutMs: 300 });
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
      await late.close(); // its session ends; once it is away past the member timeout, G's two rollouts go to core0
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
      assert.ok(
        logs.some((l) => /core1: .*gave 2 rollouts held here to another core/.test(l)),
        logs.join("\n"),
      );
      await late.close();
      await other.close();
    } finally {
      await gw.close();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  },
);
