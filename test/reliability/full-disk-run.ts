// A gateway whose store fills its filesystem, run inside a mount namespace with a small tmpfs (test/full-disk.test.ts
// starts it under bwrap): `node --import tsx full-disk-run.ts <tmpfs dir> <workers> [<store reserve>]`. It fills the tmpfs with a filler
// file but for a little room, drives rollouts until the gateway refuses them, checks the refusals and that the gateway
// still serves, deletes the filler, checks that serving resumes, then stops the gateway, reopens the store and reads back
// everything acknowledged. Prints one line `FULL-DISK-RESULT <json>` with what it found.
import { unlinkSync } from "node:fs";
import { join } from "node:path";
import { startSim } from "../../sim/index.ts";
import { Store } from "../../store/store.ts";
import { spawnCli, until } from "../helpers.ts";
import { fillFilesystem, freeBytes, postAnswer as post, type Answer } from "./small-tmpfs.ts";

const [dir, workersArg, reserveArg] = process.argv.slice(2);
if (!dir || !workersArg) throw new Error("usage: full-disk-run.ts <tmpfs dir> <workers> [<store reserve>]");
const workers = Number(workersArg);
/** 0: no reserve, so writes run until one fails with ENOSPC (the path every write takes when the reserve is not enough). */
const RESERVE = Number(reserveArg ?? 256 * 1024);
const storeDir = join(dir, "store");
const filler = join(dir, "filler");

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const sim = await startSim({ port: 0, interTokenMs: 0 });
const gw = spawnCli([
  "serve",
  "--upstream",
  sim.url,
  "--port",
  "0",
  "--grpc-port",
  "0",
  "--data",
  storeDir,
  "--workers",
  String(workers),
  "--store-reserve",
  String(RESERVE),
]);
const result = {
  workers,
  reserve: RESERVE,
  acknowledgedCalls: 0,
  acknowledgedFinishes: 0,
  refusedCalls: 0,
  refusedFinishes: 0,
  refusedCreates: 0,
  otherErrors: [] as string[],
  /** Answers cut short: a call whose commit found the disk full after its answer had begun (headers sent). */
  cut: [] as string[],
  checks: {} as Record<string, unknown>,
  missingAfterReopen: [] as string[],
  fullLogLines: 0,
  resumeLogLines: 0,
  unhandled: [] as string[],
  exit: null as string | null,
};
try {
  await gw.waitFor(/trajectories:\s+grpc:\/\/\S+/, 180_000);
  const url = gw.output().match(/listening on (http:\/\/\S+)/)![1]!;
  const pids = [
    gw.child.pid!,
    ...(gw
      .output()
      .match(/workers:\s+\d+ \(pids ([\d, ]+)\)/)?.[1]
      ?.split(", ")
      .map(Number) ?? []),
  ];
  const calls = new Map<number, string>(); // acknowledged call → its rollout
  const finished = new Set<string>();
  const create = async () => {
    const a = await post(`${url}/api/rollouts`, {});
    return a.status === 201 ? (JSON.parse(a.text) as { id: string }).id : a;
  };
  const held = await create();
  const heldForFinish = await create();
  if (typeof held !== "string" || typeof heldForFinish !== "string") throw new Error("no rollout before the fill");
  fillFilesystem(filler, dir, RESERVE + 768 * 1024);
  result.checks["freeAfterFill"] = freeBytes(dir);

  // Load until every kind of write has been refused: the store's room runs out, then the reserve holds.
  const note = (what: string, a: Answer, ok: number) => {
    if (a.status === ok) return true;
    if (a.status === 507 && a.text.includes("RLGATE_STORE_FULL")) {
      if (what === "call") result.refusedCalls++;
      else if (what === "finish") result.refusedFinishes++;
      else result.refusedCreates++;
    } else if (a.status === 0) result.cut.push(`${what}: ${a.text}`);
    else result.otherErrors.push(`${what}: ${a.status} ${a.text.slice(0, 300)}`);
    return false;
  };
  const client = async (index: number) => {
    const refused = () => result.refusedCalls + result.refusedCreates + result.refusedFinishes;
    for (let r = 0; refused() < 8 && r < 2000; r++) {
      const created = await post(`${url}/api/rollouts`, {});
      if (!note("create", created, 201)) continue;
      const id = (JSON.parse(created.text) as { id: string }).id;
      for (let i = 0; i < 3; i++) {
        const stream = (index + i) % 2 === 0;
        const a = await post(`${url}/r/${id}/v1/chat/completions`, {
          messages: [{ role: "user", content: `client ${index} rollout ${r} call ${i} ${"x".repeat(2000)}` }],
          stream,
          max_tokens: 64,
        });
        if (note("call", a, 200) && (!stream || a.text.trimEnd().endsWith("data: [DONE]"))) calls.set(a.seq, id);
      }
      if (note("finish", await post(`${url}/api/rollouts/${id}/finish`, { reward: 1 }), 200)) finished.add(id);
    }
  };
  await Promise.all([0, 1, 2, 3].map(client));

  // Full: each kind of write refused in the harness API's own shape, the gateway alive and healthy.
  const chat = await post(`${url}/r/${held}/v1/chat/completions`, { messages: [{ role: "user", content: "hi" }] });
  const messages = await post(`${url}/r/${held}/v1/messages`, {
    model: "m",
    max_tokens: 16,
    messages: [{ role: "user", content: "hi" }],
  });
  const finish = await post(`${url}/api/rollouts/${heldForFinish}/finish`, { reward: 1 });
  const newRollout = await post(`${url}/api/rollouts`, {});
  result.checks["whileFull"] = {
    chat: { status: chat.status, body: JSON.parse(chat.text) as unknown },
    messages: { status: messages.status, body: JSON.parse(messages.text) as unknown },
    finish: { status: finish.status, body: JSON.parse(finish.text) as unknown },
    create: { status: newRollout.status, body: JSON.parse(newRollout.text) as unknown },
    healthz: (await fetch(`${url}/healthz`)).status,
    alive: pids.map(alive),
  };

  // Space returns: the same gateway records again, without a restart.
  unlinkSync(filler);
  const resumed = await until(
    async () => {
      const a = await post(`${url}/r/${held}/v1/chat/completions`, { messages: [{ role: "user", content: "again" }] });
      return a.status === 200 ? a : undefined;
    },
    60_000,
    "a call recorded after the filler is deleted",
  );
  calls.set(resumed.seq, held);
  // Each process looks at the free space on its own (at most every 50 ms): a finish or a create that reaches another
  // worker than the call did may find it still full for that long, so each is asked until it is taken (or 60 s).
  const untilTaken = (send: () => Promise<{ status: number }>, what: string) =>
    until(
      async () => {
        const a = await send();
        return a.status === 507 ? undefined : a;
      },
      60_000,
      what,
    );
  const finishAfter = await untilTaken(
    () => post(`${url}/api/rollouts/${heldForFinish}/finish`, { reward: 1 }),
    "a finish recorded after the filler is deleted",
  );
  if (finishAfter.status === 200) finished.add(heldForFinish);
  const createAfter = await untilTaken(
    () => post(`${url}/api/rollouts`, {}),
    "a rollout created after the filler is deleted",
  );
  result.checks["afterSpaceReturns"] = { finish: finishAfter.status, create: createAfter.status };

  await gw.kill("SIGTERM");
  result.exit = gw.child.signalCode ?? String(gw.child.exitCode);
  result.acknowledgedCalls = calls.size;
  result.acknowledgedFinishes = finished.size;
  // Reopened: every call and finish the gateway acknowledged is there, and every rollout's calls read back.
  const store = new Store({ path: storeDir });
  try {
    for (const [seq, rollout] of calls) {
      const call = store.getCall(rollout, seq);
      if (!call || call.status !== "ok" || !call.choices[0]?.tokenIds.length)
        result.missingAfterReopen.push(`call ${seq}`);
    }
    for (const id of finished)
      if (store.getRollout(id)?.status === "open") result.missingAfterReopen.push(`finish ${id}`);
    for (const rollout of new Set(calls.values())) store.listCalls(rollout);
  } finally {
    await store.close();
  }
} finally {
  await gw.kill("SIGKILL");
  await sim.close();
  const out = gw.output();
  result.fullLogLines = out.split("\n").filter((line) => line.includes(" is full: ")).length;
  result.resumeLogLines = out.split("\n").filter((line) => line.includes("bytes free again")).length;
  result.unhandled = out.split("\n").filter((line) => /unhandled|uncaught|SIGBUS/i.test(line));
  if (process.env.RLGATE_FULL_DISK_LOG) console.log(out);
  console.log(`FULL-DISK-RESULT ${JSON.stringify(result)}`);
}
