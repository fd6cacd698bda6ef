// npm run test:reliability: the kill test and the soak, at full size, with their figures printed.
//   kill: RLGATE_KILLS (10) SIGKILLs of a `rlgate serve` process under RLGATE_CLIENTS (16) clients' streaming load;
//         after each, a restart on the same store reads back every call a client saw complete and every finish the
//         gateway answered.
//   soak: RLGATE_SOAK_SECONDS (300) of the same load on one gateway process; its RSS and heap (from its /metrics)
//         sampled every RLGATE_SOAK_SAMPLE_SECONDS (15).
// Exits 1 when anything acknowledged was lost or the heap grew by more than a quarter from the first sample on.
import { rmSync } from "node:fs";
import { startSim } from "../sim/index.ts";
import { tempDir } from "../test/helpers.ts";
import { client, newAcknowledged, spawnGateway, verify } from "../test/reliability/load.ts";

const env = (name: string, fallback: number) => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number`);
  return value;
};
const KILLS = env("RLGATE_KILLS", 10);
const CLIENTS = env("RLGATE_CLIENTS", 16);
const SOAK_SECONDS = env("RLGATE_SOAK_SECONDS", 300);
const SAMPLE_SECONDS = env("RLGATE_SOAK_SAMPLE_SECONDS", 15);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const sim = await startSim({ port: 0, interTokenMs: 1 });
let failed = false;

async function killTest(): Promise<void> {
  const dataDir = tempDir("reliability-kill");
  const ack = newAcknowledged();
  let gateway = await spawnGateway(sim.url, dataDir);
  let lost = { calls: 0, broken: 0, finishes: 0 };
  const started = performance.now();
  try {
    for (let kill = 1; kill <= KILLS; kill++) {
      let stopped = false;
      const before = ack.calls.size;
      const current = gateway;
      const clients = Array.from({ length: CLIENTS }, (_, i) =>
        client(
          () => current.url,
          i,
          ack,
          () => stopped,
        ),
      );
      // A random moment once the load is on: between 100 and 1,100 more completed calls.
      const target = before + 100 + Math.floor(Math.random() * 1000);
      while (ack.calls.size < target) await sleep(5);
      const exited = current.proc.kill("SIGKILL");
      stopped = true;
      await Promise.all(clients);
      await exited;
      gateway = await spawnGateway(sim.url, dataDir);
      const verified = await verify(gateway.url, ack);
      lost = {
        calls: verified.lostCalls.length,
        broken: verified.brokenCalls.length,
        finishes: verified.lostFinishes.length,
      };
      console.log(
        `kill ${kill}/${KILLS}: ${ack.calls.size} calls complete so far, ${ack.finishes.size} finishes acknowledged; lost after restart: ${lost.calls} calls, ${lost.broken} without tokens, ${lost.finishes} finishes`,
      );
    }
  } finally {
    await gateway.proc.kill("SIGTERM");
    rmSync(dataDir, { recursive: true, force: true });
  }
  const found = ack.calls.size - lost.calls;
  console.log(
    `\nKILL TEST: ${KILLS} SIGKILLs under ${CLIENTS}-client streaming load in ${((performance.now() - started) / 1000).toFixed(0)} s: ` +
      `${ack.calls.size} calls the clients saw complete, ${found} found after restart (${lost.broken} without tokens); ` +
      `${ack.finishes.size - lost.finishes} of ${ack.finishes.size} acknowledged finishes kept`,
  );
  if (lost.calls || lost.broken || lost.finishes) failed = true;
}

/** A gauge of the gateway's own /metrics (prom-client's process metrics, prefixed rlgate_). */
async function gauge(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const match = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text);
  return match ? Number(match[1]) : Number.NaN;
}

async function soak(): Promise<void> {
  const dataDir = tempDir("reliability-soak");
  const gateway = await spawnGateway(sim.url, dataDir);
  const ack = newAcknowledged();
  let stopped = false;
  const clients = Array.from({ length: CLIENTS }, (_, i) =>
    client(
      () => gateway.url,
      i,
      ack,
      () => stopped,
    ),
  );
  const samples: Array<{ t: number; calls: number; rssMb: number; heapMb: number }> = [];
  const started = performance.now();
  try {
    console.log(`\nSOAK: ${SOAK_SECONDS} s of ${CLIENTS}-client load, sampled every ${SAMPLE_SECONDS} s`);
    console.log("     t     calls   rss MB   heap MB");
    for (;;) {
      const t = (performance.now() - started) / 1000;
      const sample = {
        t,
        calls: ack.calls.size,
        rssMb: (await gauge(gateway.url, "rlgate_process_resident_memory_bytes")) / 2 ** 20,
        heapMb: (await gauge(gateway.url, "rlgate_nodejs_heap_size_used_bytes")) / 2 ** 20,
      };
      samples.push(sample);
      console.log(
        `${t.toFixed(0).padStart(6)} ${String(sample.calls).padStart(9)} ${sample.rssMb.toFixed(1).padStart(8)} ${sample.heapMb.toFixed(1).padStart(9)}`,
      );
      if (t >= SOAK_SECONDS) break;
      await sleep(Math.min(SAMPLE_SECONDS * 1000, Math.max(0, (SOAK_SECONDS - t) * 1000)));
    }
  } finally {
    stopped = true;
    await Promise.all(clients);
    await gateway.proc.kill("SIGTERM");
    rmSync(dataDir, { recursive: true, force: true });
  }
  // The first sample is a cold process; flatness is judged from the second one on.
  const settled = samples.slice(1);
  const heaps = settled.map((s) => s.heapMb);
  const rss = settled.map((s) => s.rssMb);
  const growth = heaps.length > 1 ? heaps.at(-1)! / heaps[0]! - 1 : 0;
  console.log(
    `\nSOAK: ${ack.calls.size} calls and ${ack.finishes.size} finished rollouts in ${SOAK_SECONDS} s; ` +
      `heap ${Math.min(...heaps).toFixed(1)}–${Math.max(...heaps).toFixed(1)} MB (first → last ${growth >= 0 ? "+" : ""}${(growth * 100).toFixed(0)}%), ` +
      `RSS ${Math.min(...rss).toFixed(1)}–${Math.max(...rss).toFixed(1)} MB`,
  );
  if (growth > 0.25) failed = true;
}

try {
  if (KILLS > 0) await killTest();
  if (SOAK_SECONDS > 0) await soak();
} finally {
  await sim.close();
}
process.exit(failed ? 1 : 0);
