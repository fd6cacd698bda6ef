// A consumer that stops reading must not grow the gateway's memory: the stream reads the store one rollout at a
// time and writes the next only once HTTP/2 took the previous one, so a frozen consumer (SIGSTOP) holds the
// gateway at the rollouts already in flight, however many more finish.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { putSyntheticRollout, startGrpcGateway } from "./grpc-helpers.ts";
import { ROOT, until } from "./helpers.ts";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

function footprint(): { heap: number; external: number; rss: number } {
  gc();
  gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, external: m.arrayBuffers, rss: m.rss };
}

const MB = 1024 * 1024;
const cleanup: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

test(
  "a consumer that stops reading leaves the gateway's memory flat while rollouts keep finishing",
  { timeout: 120_000 },
  async () => {
    const gw = await startGrpcGateway();
    cleanup.push(() => gw.close());
    const store = gw.context.store;
    const big = { promptTokens: 40_000, sampledTokens: 64, turns: 1 };
    for (let i = 0; i < 20; i++) await putSyntheticRollout(store, { id: `warm${i}`, reward: 1, ...big });

    const script = `
    import { TrajectoryConsumer } from ${JSON.stringify(`${ROOT}clients/ts/index.ts`)};
    let n = 0;
    const c = new TrajectoryConsumer({ address: ${JSON.stringify(gw.grpc!.address)}, maxInFlight: 100000, leaseTimeoutMs: 600000,
      onRollout: () => { n++; if (n === 1) console.log("first"); } });
    c.start();`;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "inherit"],
    });
    cleanup.push(() => {
      child.kill("SIGCONT");
      child.kill("SIGKILL");
    });
    await new Promise<void>((resolve) =>
      child.stdout!.on("data", (d: Buffer) => d.toString().includes("first") && resolve()),
    );
    child.kill("SIGSTOP");
    const group = gw.grpc!.stream.group("rl-core");
    await new Promise((r) => setTimeout(r, 500));
    const before = footprint();
    const leasedBefore = group.leased;

    const rounds = 240;
    for (let i = 0; i < rounds; i++) await putSyntheticRollout(store, { id: `more${i}`, reward: 1, ...big });
    await new Promise((r) => setTimeout(r, 500));
    const afterAll = footprint();
    const payload = (rounds * (big.promptTokens + big.sampledTokens) * 9) / MB;
    const grew = (afterAll.heap + afterAll.external - before.heap - before.external) / MB;
    console.log(
      `  ${rounds} rollouts (${payload.toFixed(0)} MB of token payload) finished while the consumer was frozen: ` +
        `gateway heap+buffers ${((before.heap + before.external) / MB).toFixed(1)} → ${((afterAll.heap + afterAll.external) / MB).toFixed(1)} MB, ` +
        `rss ${(before.rss / MB).toFixed(0)} → ${(afterAll.rss / MB).toFixed(0)} MB; leased ${leasedBefore} → ${group.leased}`,
    );
    assert.ok(grew < 20, `gateway memory grew by ${grew.toFixed(1)} MB for ${payload.toFixed(0)} MB of payload`);
    // The frozen session read nothing more from the store than what was already in flight.
    assert.ok(group.leased <= leasedBefore + 1, `leased ${leasedBefore} → ${group.leased}`);
    assert.ok(group.leased < 40);

    // Thawed, it reads on from where it stopped.
    child.kill("SIGCONT");
    await until(() => (group.leased >= 200 ? true : undefined), 60_000, "the thawed consumer reads on");
  },
);
