// bench/gateway-cpu.ts — rlgate's CPU per call against the bare forwarder's, interleaved: both (and, with --base, the
// gateway of another checkout, e.g. the code before a change) take turns in blocks of calls at concurrency 1 against
// one simulated vLLM, round after round, so a machine whose load drifts weighs on every target alike. Each block's CPU
// per call is the time the target process's threads ran over its calls (bench/process-cpu.ts); the figures are the
// medians over rounds, with the lowest and highest round beside them, and the same for rlgate's ratio to the
// forwarder and its added p50 (both computed within each round).
//
//   npx tsx bench/gateway-cpu.ts                         7 rounds of 400 calls a target, streamed and non-streamed
//   npx tsx bench/gateway-cpu.ts --base /path/to/checkout --rounds 9 --calls 300
//   npx tsx bench/gateway-cpu.ts --frame                 adds rlgate's HTTP frame without capture (frame-forwarder.ts)
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { Pool } from "undici";
import { pinThisProcess, spawnListening } from "./spawn-listening.ts";
import { processCpuSeconds } from "./process-cpu.ts";
import { AGENT_BODY } from "./agent-calls.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const { values: args } = parseArgs({
  options: {
    base: { type: "string" },
    "node-args": { type: "string" },
    "base-node-args": { type: "string" },
    pin: { type: "boolean" },
    frame: { type: "boolean" },
    rounds: { type: "string", default: "7" },
    warmup: { type: "string", default: "6000" },
    calls: { type: "string", default: "400" },
    help: { type: "boolean", short: "h" },
  },
});
if (args.help) {
  console.log(`usage: tsx bench/gateway-cpu.ts [--base DIR] [--rounds R] [--calls N] [--warmup W] [--node-args A] [--base-node-args A]

rlgate serve, the bare http-proxy forwarder (asking for token ids, as rlgate does) and, with --base, rlgate serve from
the checkout DIR (its node_modules installed), take turns: R rounds of N calls each at concurrency 1, streamed then
non-streamed, each after W warm-up calls (default 6000: V8 still optimizes the gateway's code before). Prints each target's median CPU ms per call (min–max over rounds), median p50, and rlgate's ratio to the
forwarder and added p50, computed per round. --frame adds bench/frame-forwarder.ts (rlgate's server, upstream client
and write pattern, without capture): rlgate's ratio over the frame's is what capture costs. --node-args and --base-node-args: node's flags for this
checkout's gateway and the base's (e.g. --base . --node-args="--max-semi-space-size=32": the same code, V8 set apart).
--pin: the forwarder and the gateways on core 0, the sim and this load generator on the other cores (taskset), so the
targets do not share a core with the upstream or the client (2 cores or more).`);
  process.exit(0);
}
/** With --pin: the targets' core, and the cores of the sim and the load generator. */
const CORES = availableParallelism();
if (args.pin && CORES < 2) throw new Error("--pin needs 2 cores or more");
const pinning = args.pin ? { targets: "0", rest: CORES === 2 ? "1" : `1-${CORES - 1}` } : null;
const ROUNDS = Number(args.rounds);
const CALLS = Number(args.calls);
const WARMUP = Number(args.warmup);
if (!(ROUNDS >= 1 && CALLS >= 10)) throw new Error("--rounds must be ≥ 1 and --calls ≥ 10");

interface Target {
  name: string;
  pid: number;
  pool: Pool;
  path: string;
  /** The forwarders send the fields rlgate adds, so the sim does the same work behind each. */
  ids: boolean;
}

const FORWARDER = "proxy+ids";

async function block(target: Target, body: string, calls: number): Promise<{ cpu: number; p50: number }> {
  const times: number[] = [];
  const before = processCpuSeconds(target.pid)!;
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    const res = await target.pool.request({
      method: "POST",
      path: target.path,
      headers: { "content-type": "application/json" },
      body,
    });
    for await (const _chunk of res.body);
    if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode} from ${target.name}`);
    times.push(performance.now() - t0);
  }
  const cpu = ((processCpuSeconds(target.pid)! - before) * 1000) / calls;
  times.sort((a, b) => a - b);
  return { cpu, p50: times[Math.floor(times.length / 2)]! };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const spread = (values: number[], digits: number) =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-cpu-"));
  const children: ChildProcess[] = [];
  try {
    if (pinning) pinThisProcess(pinning.rest);
    const cores = pinning?.targets;
    const sim = await spawnListening(["cli/index.ts", "sim", "--port", "0"], "sim", {
      cwd: ROOT,
      cores: pinning?.rest,
    });
    children.push(sim.child);
    const nodeArgs = (value: string | undefined) => (value ? value.split(/\s+/).filter(Boolean) : []);
    const checkouts: Array<[string, string, string[]]> = [["rlgate", ROOT, nodeArgs(args["node-args"])]];
    if (args.base) checkouts.push(["rlgate (base)", resolve(args.base), nodeArgs(args["base-node-args"])]);
    const targets: Target[] = [];
    const forwarder = await spawnListening(["bench/bare-forwarder.ts", sim.url], "forwarder", { cwd: ROOT, cores });
    children.push(forwarder.child);
    targets.push({
      name: FORWARDER,
      pid: forwarder.child.pid!,
      pool: new Pool(forwarder.url, { connections: 1 }),
      path: "/v1/chat/completions",
      ids: true,
    });
    if (args.frame) {
      const frame = await spawnListening(["bench/frame-forwarder.ts", sim.url], "frame", { cwd: ROOT, cores });
      children.push(frame.child);
      targets.push({
        name: "frame+ids",
        pid: frame.child.pid!,
        pool: new Pool(frame.url, { connections: 1 }),
        path: "/v1/chat/completions",
        ids: true,
      });
    }
    for (const [name, cwd, flags] of checkouts) {
      const data = join(dir, `data-${targets.length}`);
      const serve = ["cli/index.ts", "serve", "--workers", "1", "--upstream", sim.url, "--port", "0", "--data", data];
      const gateway = await spawnListening(serve, name, { cwd, nodeArgs: flags, cores });
      children.push(gateway.child);
      const created = await fetch(`${gateway.url}/api/rollouts`, { method: "POST", body: "{}" });
      const id = ((await created.json()) as { id: string }).id;
      targets.push({
        name,
        pid: gateway.child.pid!,
        pool: new Pool(gateway.url, { connections: 1 }),
        path: `/r/${id}/v1/chat/completions`,
        ids: false,
      });
    }
    console.log(
      `bench/gateway-cpu — ${ROUNDS} rounds × ${CALLS} calls a target, concurrency 1, targets interleaved${pinning ? `, pinned (targets on core ${pinning.targets}, sim and load on ${pinning.rest})` : ""}; load average ${loadavg()[0]!.toFixed(2)} at the start`,
    );
    for (const stream of [true, false]) {
      const bodies = {
        plain: JSON.stringify({ ...AGENT_BODY, stream }),
        ids: JSON.stringify({ ...AGENT_BODY, stream, return_token_ids: true, logprobs: true }),
      };
      const bodyOf = (t: Target) => (t.ids ? bodies.ids : bodies.plain);
      // Warm-up: pools, and V8's optimizing compiler, which goes on working for thousands of calls (see bench/gateway.ts).
      for (const target of targets) await block(target, bodyOf(target), WARMUP);
      const cpu = new Map<string, number[]>(targets.map((t) => [t.name, []]));
      const p50 = new Map<string, number[]>(targets.map((t) => [t.name, []]));
      for (let round = 0; round < ROUNDS; round++) {
        // Each round starts with another target, so none always runs right after the same one.
        for (let k = 0; k < targets.length; k++) {
          const target = targets[(round + k) % targets.length]!;
          const figures = await block(target, bodyOf(target), CALLS);
          cpu.get(target.name)!.push(figures.cpu);
          p50.get(target.name)!.push(figures.p50);
        }
      }
      console.log(`\n${stream ? "STREAMED" : "NON-STREAMED"}`);
      console.log(
        "target            cpu ms/call (min–max)      p50 ms (min–max)        ×forwarder cpu      added p50 ms",
      );
      const fwCpu = cpu.get(FORWARDER)!;
      const fwP50 = p50.get(FORWARDER)!;
      for (const target of targets) {
        const mine = cpu.get(target.name)!;
        const lat = p50.get(target.name)!;
        const reference = target.name === FORWARDER;
        const vs = reference
          ? ""
          : spread(
              mine.map((c, r) => c / fwCpu[r]!),
              2,
            ).padEnd(20);
        const added = reference
          ? ""
          : spread(
              lat.map((l, r) => l - fwP50[r]!),
              3,
            );
        console.log(
          `${target.name.padEnd(16)}  ${spread(mine, 3).padEnd(25)}  ${spread(lat, 3).padEnd(22)}  ${vs}${added}`,
        );
      }
      const frame = cpu.get("frame+ids");
      if (frame) {
        const own = cpu.get("rlgate")!;
        console.log(
          `rlgate − frame    ${spread(
            own.map((c, r) => c - frame[r]!),
            3,
          )} ms/call: capture's CPU; frame − forwarder ${spread(
            frame.map((c, r) => c - fwCpu[r]!),
            3,
          )}: the frame's`,
        );
      }
    }
    console.log(`\nload average ${loadavg()[0]!.toFixed(2)} at the end`);
    await Promise.all(targets.map((t) => t.pool.close()));
  } finally {
    for (const child of children) child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
