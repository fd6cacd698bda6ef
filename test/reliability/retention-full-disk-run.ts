// A gateway with `--retain 1s` whose store fills its filesystem while its RL core holds every rollout unacknowledged,
// run inside a mount namespace with a small tmpfs (test/retention-full-disk.test.ts starts it under bwrap):
// `node --import tsx retention-full-disk-run.ts <tmpfs dir>`. It fills the tmpfs with a filler file but for a little
// room, drives rollouts until the gateway refuses them, then lets the core acknowledge what it holds — the filler
// stays: only retention can make room — and checks that serving resumes, then reopens the store and reads back what
// was recorded after. Prints one line `RETENTION-FULL-DISK-RESULT <json>` with what it found.
import { join } from "node:path";
import { TrajectoryConsumer } from "../../clients/ts/index.ts";
import { startSim } from "../../sim/index.ts";
import { Store } from "../../store/store.ts";
import { spawnCli, until } from "../helpers.ts";
import { fillFilesystem, freeBytes, postAnswer as post } from "./small-tmpfs.ts";

const [dirArg] = process.argv.slice(2);
if (!dirArg) throw new Error("usage: retention-full-disk-run.ts <tmpfs dir>");
const dir: string = dirArg;
const RESERVE = 256 * 1024;
const storeDir = join(dir, "store");

const sim = await startSim({ port: 0, interTokenMs: 0 });
const gw = spawnCli([
  ...["serve", "--upstream", sim.url, "--port", "0", "--grpc-port", "0", "--data", storeDir, "--workers", "1"],
  ...["--retain", "1s", "--store-reserve", String(RESERVE)],
]);
const result = {
  finishedBeforeFull: 0,
  refused: 0,
  otherErrors: [] as string[],
  freeAfterFill: 0,
  refusedBeforeAck: null as number | null,
  resumed: false,
  removedLogLines: 0,
  recordedAfter: [] as Array<{ rollout: string; seq: number }>,
  missingAfterReopen: [] as string[],
  unhandled: [] as string[],
  error: null as string | null,
};
let consumer: TrajectoryConsumer | null = null;
try {
  await gw.waitFor(/trajectories:\s+grpc:\/\/\S+/, 180_000);
  const url = gw.output().match(/listening on (http:\/\/\S+)/)![1]!;
  const grpc = gw.output().match(/trajectories:\s+grpc:\/\/(\S+)/)![1]!;
  // The core holds what it is sent until told to acknowledge: meanwhile retention may remove nothing.
  let acking = false;
  const held: number[] = [];
  const core: TrajectoryConsumer = new TrajectoryConsumer({
    address: grpc,
    consumerGroup: "cores",
    member: "core-1",
    maxInFlight: 100_000,
    onRollout(m) {
      if (acking) core.ack([m.cursor]);
      else held.push(m.cursor);
    },
  });
  consumer = core;
  core.start();
  const live = await post(`${url}/api/rollouts`, {});
  const liveId = (JSON.parse(live.text) as { id: string }).id;
  fillFilesystem(join(dir, "filler"), dir, RESERVE + 4 * 1024 * 1024); // room for a few MB of rollouts: what retention frees must pass the resume margin
  result.freeAfterFill = freeBytes(dir);

  // Rollouts until the store refuses: each one finished (so the core is sent it), none acknowledged.
  for (let r = 0; result.refused < 4 && r < 2000; r++) {
    const created = await post(`${url}/api/rollouts`, {});
    if (created.status !== 201) {
      if (created.status === 507) result.refused++;
      else result.otherErrors.push(`create: ${created.status} ${created.text.slice(0, 200)}`);
      continue;
    }
    const id = (JSON.parse(created.text) as { id: string }).id;
    let ok = true;
    for (let i = 0; i < 3 && ok; i++) {
      const a = await post(`${url}/r/${id}/v1/chat/completions`, {
        messages: [{ role: "user", content: `rollout ${r} call ${i} ${"x".repeat(4000)}` }],
        max_tokens: 64,
      });
      if (a.status === 507) result.refused++;
      else if (a.status !== 200) result.otherErrors.push(`call: ${a.status} ${a.text.slice(0, 200)}`);
      ok = a.status === 200;
    }
    const f = await post(`${url}/api/rollouts/${id}/finish`, { reward: 1 });
    if (f.status === 200) result.finishedBeforeFull++;
    else if (f.status === 507) result.refused++;
    else result.otherErrors.push(`finish: ${f.status} ${f.text.slice(0, 200)}`);
  }
  const probe = () =>
    post(`${url}/r/${liveId}/v1/chat/completions`, { messages: [{ role: "user", content: "again" }], max_tokens: 16 });
  result.refusedBeforeAck = (await probe()).status;

  // The core acknowledges: retention removes those rollouts and LMDB has their pages to reuse; the filler stays.
  acking = true;
  await until(() => (held.length > 0 ? true : undefined), 30_000, "rollouts sent to the core");
  core.ack(held.splice(0));
  const resumed = await until(
    async () => {
      const a = await probe();
      return a.status === 200 ? a : undefined;
    },
    120_000,
    "a call recorded once retention made room",
  );
  result.resumed = true;
  result.recordedAfter.push({ rollout: liveId, seq: resumed.seq });
  const more = await probe();
  if (more.status === 200) result.recordedAfter.push({ rollout: liveId, seq: more.seq });

  await consumer.close();
  consumer = null;
  await gw.kill("SIGTERM");
  const store = new Store({ path: storeDir });
  try {
    for (const { rollout, seq } of result.recordedAfter)
      if (!store.getCall(rollout, seq)?.choices[0]?.tokenIds.length) result.missingAfterReopen.push(`call ${seq}`);
  } finally {
    await store.close();
  }
} catch (error) {
  result.error = String((error as Error).stack ?? error);
} finally {
  void consumer?.close();
  await gw.kill("SIGKILL");
  await sim.close();
  const out = gw.output();
  result.removedLogLines = out.split("\n").filter((line) => line.includes("retention: removed")).length;
  result.unhandled = out.split("\n").filter((line) => /unhandled|uncaught|SIGBUS/i.test(line));
  if (process.env.RLGATE_FULL_DISK_LOG) console.log(out);
  console.log(`RETENTION-FULL-DISK-RESULT ${JSON.stringify(result)}`);
}
