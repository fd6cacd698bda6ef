// bench:workers — what `rlgate serve --workers N` gives: the same simulated vLLM (no artificial latency) reached
// through a bare http-proxy forwarder (asking for token ids, as rlgate does), `rlgate serve --workers 1` and
// `--workers 2`, at concurrency 32, non-streamed and streamed, in one run. Prints requests/s, p50/p99 latency, CPU ms
// per call (all of the forwarder's or gateway's processes) and throughput against the forwarder's; each gateway twice:
// all calls in one rollout over every connection (workers catch up on each other's calls), and a rollout per connection.
//
//   npm run bench:workers               default run (~1–2 min)
//   npm run bench:workers -- --quick    a few hundred requests, to check that the bench works
//   npm run bench:workers -- --pin      the forwarder and the gateways on the first half of the cores, the sim and this
//                                       load generator on the rest (taskset), so that they do not take the gateway's
//                                       CPU; --pin G gives the gateway G cores. Gateways measured: --workers 1 and G.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { Client, Pool } from "undici";
import { AGENT_BODY } from "./agent-calls.ts";
import { pinThisProcess } from "./spawn-listening.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const quick = process.argv.includes("--quick");
const pinAt = process.argv.indexOf("--pin");
/** With --pin: the cores the forwarder and the gateways run on, and those the sim and the load generator run on. */
const pinning = pinAt < 0 ? null : splitCores(process.argv[pinAt + 1]);

function splitCores(arg: string | undefined): { gateway: string; rest: string; gatewayCores: number } {
  const total = availableParallelism();
  const asked = arg !== undefined && /^\d+$/.test(arg) ? Number(arg) : Math.max(1, Math.floor(total / 2));
  if (total < 2 || asked < 1 || asked >= total) {
    console.error(`--pin needs a core for the gateway and one for the rest: this machine has ${total}, asked ${asked}`);
    process.exit(2);
  }
  const range = (from: number, to: number) => (to - from === 1 ? `${from}` : `${from}-${to - 1}`);
  return { gateway: range(0, asked), rest: range(asked, total), gatewayCores: asked };
}
const CONCURRENCY = 32;
const REQUESTS = quick ? 200 : 3000;
// Past V8's optimizing work on the gateway's code, which goes on for thousands of calls (see bench/gateway.ts).
const WARMUP = quick ? 50 : 3000;

/** What rlgate adds to each request it forwards: the forwarder's upstream does the same work. */
const CAPTURE_FIELDS = { return_token_ids: true, logprobs: true };

interface Started {
  child: ChildProcess;
  url: string;
  /** Every process that serves (a gateway's primary and its workers). */
  pids: number[];
}

/**
 * Starts a process (on `cores` only, when given: taskset) and waits for its "listening on" line (and a gateway's
 * "workers: … (pids …)" line).
 */
function start(args: string[], what: string, pidsLine = false, cores?: string): Promise<Started> {
  const command = [process.execPath, "--import", "tsx", ...args];
  if (cores !== undefined) command.unshift("taskset", "-c", cores); // taskset execs node: the same pid
  const child = spawn(command[0]!, command.slice(1), { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  return new Promise((resolve, reject) => {
    let out = "";
    const check = () => {
      const url = /listening on (http:\/\/[^\s/]+)/.exec(out)?.[1];
      const workers = /workers:\s+\d+ \(pids ([\d, ]+)\)/.exec(out)?.[1];
      const ready = pidsLine ? /trajectories:/.test(out) : url !== undefined;
      if (!url || !ready) return;
      const pids = [child.pid!, ...(workers ? workers.split(", ").map(Number) : [])];
      resolve({ child, url, pids });
    };
    child.stdout!.on("data", (c: Buffer) => ((out += c.toString()), check()));
    child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    child.once("exit", (code) => reject(new Error(`${what} exited (${code}): ${out}`)));
  });
}

/** CPU seconds (user + system) the processes have used so far (Linux /proc; null elsewhere). */
function cpuSeconds(pids: number[]): number | null {
  let total = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      total += (Number(fields[11]) + Number(fields[12])) / 100;
    } catch {
      return null;
    }
  }
  return total;
}

/** CPU seconds of the sim and of this load generator. */
function restSeconds(sim: Started): number | null {
  const simSeconds = cpuSeconds([sim.child.pid!]);
  if (simSeconds === null) return null;
  const own = process.cpuUsage();
  return simSeconds + (own.user + own.system) / 1e6;
}

async function newRollout(url: string): Promise<string> {
  const res = await fetch(`${url}/api/rollouts`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  return `/r/${((await res.json()) as { id: string }).id}`;
}

interface Cell {
  rps: number;
  p50: number;
  p99: number;
  cpuPerCall: number | null;
  /** Cores kept busy: the target's processes, and the sim's with this load generator's. */
  busy: { target: number | null; rest: number | null };
}

/**
 * `paths` one per concurrent client: one path shared by all (the calls of one rollout spread over every connection,
 * so over every worker), or a path each on a connection of its own (each rollout stays on the worker its connection
 * reached, as a harness with a kept-alive connection does).
 */
async function measure(target: Started, sim: Started, paths: string[], body: string): Promise<Cell> {
  const sticky = paths.length > 1;
  const pool = new Pool(target.url, { connections: CONCURRENCY, pipelining: 1 });
  const clients = sticky ? paths.map(() => new Client(target.url, { pipelining: 1 })) : [];
  const latencies: number[] = [];
  let next = 0;
  const loop = async (i: number, count: number, keep: boolean) => {
    const dispatcher = sticky ? clients[i]! : pool;
    const path = paths[sticky ? i : 0]!;
    while (next < count) {
      next++;
      const t0 = performance.now();
      const res = await dispatcher.request({
        method: "POST",
        path,
        headers: { "content-type": "application/json" },
        body,
      });
      for await (const _chunk of res.body);
      if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode} from ${target.url}`);
      if (keep) latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => loop(i, WARMUP, false)));
  next = 0;
  const cpuBefore = cpuSeconds(target.pids);
  const restBefore = restSeconds(sim);
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => loop(i, REQUESTS, true)));
  const seconds = (performance.now() - t0) / 1000;
  const cpuAfter = cpuSeconds(target.pids);
  const restAfter = restSeconds(sim);
  const busy = (before: number | null, after: number | null) =>
    before === null || after === null ? null : (after - before) / seconds;
  await Promise.all([pool.close(), ...clients.map((c) => c.close())]);
  latencies.sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!;
  return {
    rps: latencies.length / seconds,
    p50: q(0.5),
    p99: q(0.99),
    cpuPerCall: cpuBefore === null || cpuAfter === null ? null : ((cpuAfter - cpuBefore) * 1000) / latencies.length,
    busy: { target: busy(cpuBefore, cpuAfter), rest: busy(restBefore, restAfter) },
  };
}

async function main(): Promise<void> {
  const dirs = [mkdtempSync(join(tmpdir(), "rlgate-bench-w1-")), mkdtempSync(join(tmpdir(), "rlgate-bench-w2-"))];
  const children: ChildProcess[] = [];
  try {
    if (pinning) pinThisProcess(pinning.rest);
    const sim = await start(["cli/index.ts", "sim", "--port", "0"], "sim", false, pinning?.rest);
    children.push(sim.child);
    const forwarder = await start(["bench/bare-forwarder.ts", sim.url], "bare forwarder", false, pinning?.gateway);
    children.push(forwarder.child);
    const gateways: Array<[string, Started]> = [];
    const workerCounts = pinning ? [...new Set([1, pinning.gatewayCores])] : [1, 2];
    for (const [i, workers] of workerCounts.entries()) {
      const args = ["cli/index.ts", "serve", "--workers", String(workers), "--upstream", sim.url, "--port", "0"];
      const data = ["--data", join(dirs[i]!, "data")];
      const gateway = await start([...args, ...data], `rlgate --workers ${workers}`, true, pinning?.gateway);
      children.push(gateway.child);
      gateways.push([`rlgate --workers ${workers}`, gateway]);
    }
    console.log(
      `bench:workers — concurrency ${CONCURRENCY}, ${REQUESTS} requests per cell after ${WARMUP} warm-up; this machine: ${cpus().length} cores`,
    );
    console.log("sim upstream without artificial latency; the forwarder asks for token ids as rlgate does");
    if (pinning)
      console.log(
        `pinned (taskset): forwarder and gateways on cores ${pinning.gateway}; sim and load generator on ${pinning.rest}`,
      );
    console.log("CPU/call: all processes of the forwarder or gateway (primary and workers); times in ms");
    console.log("busy: cores kept busy by the target's processes, and by the sim with this load generator");
    console.log(
      "1 rollout: every call in one rollout, spread over all connections (with workers: each call caught up by the others)",
    );
    console.log("sticky: a rollout per connection, as harnesses keep theirs alive (no call is caught up)\n");
    for (const stream of [false, true]) {
      const plain = { ...AGENT_BODY, stream };
      console.log(stream ? "STREAMED" : "NON-STREAMED");
      console.log(
        "target                              req/s      p50      p99  CPU/call   ×forwarder   busy: target  sim+load",
      );
      const base = await measure(
        forwarder,
        sim,
        ["/v1/chat/completions"],
        JSON.stringify({ ...plain, ...CAPTURE_FIELDS }),
      );
      const row = (name: string, c: Cell) =>
        console.log(
          `${name.padEnd(31)} ${c.rps.toFixed(0).padStart(9)} ${c.p50.toFixed(2).padStart(8)} ${c.p99.toFixed(2).padStart(8)} ${(c.cpuPerCall?.toFixed(3) ?? "n/a").padStart(9)} ${(c.rps / base.rps).toFixed(2).padStart(11)} ${(c.busy.target?.toFixed(2) ?? "n/a").padStart(14)} ${(c.busy.rest?.toFixed(2) ?? "n/a").padStart(9)}`,
        );
      row("http-proxy+ids", base);
      for (const [name, gateway] of gateways) {
        const path = `${await newRollout(gateway.url)}/v1/chat/completions`;
        row(`${name}, 1 rollout`, await measure(gateway, sim, [path], JSON.stringify(plain)));
        const paths = await Promise.all(
          Array.from({ length: CONCURRENCY }, async () => `${await newRollout(gateway.url)}/v1/chat/completions`),
        );
        row(`${name}, sticky`, await measure(gateway, sim, paths, JSON.stringify(plain)));
      }
      console.log("");
    }
  } finally {
    for (const child of children) child.kill("SIGTERM");
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}

await main();
