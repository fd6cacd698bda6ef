// bench/perf-steps.ts — where a call's CPU goes, per step, with the kernel and V8's helper threads: `perf` samples the
// target process (rlgate serve or the bare forwarder) while the bench's agent calls run at concurrency 1, and each
// sample is charged to one place (bench/perf-samples.ts): a system call, the file of the innermost JavaScript frame, or
// the library it ran in; samples of other threads than the main one (V8's garbage collector and compiler, libuv's
// pool, the trajectory thread) are marked so.
// Shares are scaled by the process's CPU over the same calls (bench/process-cpu.ts), so each row reads as µs a call.
//
//   npx tsx bench/perf-steps.ts                          rlgate, streamed, 6,000 warm-up calls, 3,000 sampled
//   npx tsx bench/perf-steps.ts --target proxy --non-streamed
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Pool } from "undici";
import { AGENT_BODY, agentSizedBody, rolloutChatPath, sendCalls } from "./agent-calls.ts";
import { processCpuSeconds } from "./process-cpu.ts";
import { placeOf, samples } from "./perf-samples.ts";
import { spawnListening } from "./spawn-listening.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const { values: args } = parseArgs({
  options: {
    target: { type: "string", default: "rlgate" },
    "non-streamed": { type: "boolean" },
    "agent-sized": { type: "boolean" },
    warmup: { type: "string", default: "6000" },
    calls: { type: "string", default: "3000" },
    freq: { type: "string", default: "2000" },
    top: { type: "string", default: "25" },
    "script-out": { type: "string" },
    help: { type: "boolean", short: "h" },
  },
});
if (args.help) {
  console.log(`usage: tsx bench/perf-steps.ts [--target rlgate|proxy] [--non-streamed] [--agent-sized] [--warmup W] [--calls N] [--freq HZ]

Runs the target (rlgate serve --workers 1, or the bare http-proxy forwarder asking for token ids) against the
simulated vLLM with node --perf-basic-prof-only-functions, sends W warm-up calls (default 6000: V8 optimizes the
gateway's code for thousands of calls), then samples the process with perf (cpu-clock, HZ a second, call graphs)
over N calls at concurrency 1 (--script-out FILE keeps perf script's text, for flame graphs). Prints, per place (thread, system call, JavaScript file, library), the share of the
samples and the µs of CPU a call it stands for. Needs perf (apt-get install linux-perf) and permission to profile
the process (root, or kernel.perf_event_paranoid ≤ 1). --agent-sized sends bench:gateway's agent-sized request (a 52 kB
conversation of 20 tool round trips, ~17k prompt tokens) instead of an agent's first turn.`);
  process.exit(0);
}
const WARMUP = Number(args.warmup);
const CALLS = Number(args.calls);
const FREQ = Number(args.freq);
const STREAM = !args["non-streamed"];
if (!["rlgate", "proxy"].includes(args.target!)) throw new Error("--target is rlgate or proxy");
if (spawnSync("perf", ["--version"]).error) throw new Error("perf is not installed: apt-get install linux-perf");

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-perf-"));
  const children: ChildProcess[] = [];
  try {
    const sim = await spawnListening(["cli/index.ts", "sim", "--port", "0"], "sim", { cwd: ROOT });
    children.push(sim.child);
    const nodeArgs = ["--perf-basic-prof-only-functions"];
    const target =
      args.target === "proxy"
        ? await spawnListening(["bench/bare-forwarder.ts", sim.url], "forwarder", { cwd: ROOT, nodeArgs })
        : await spawnListening(
            [
              "cli/index.ts",
              "serve",
              "--workers",
              "1",
              "--upstream",
              sim.url,
              "--port",
              "0",
              "--data",
              join(dir, "data"),
            ],
            "rlgate",
            { cwd: ROOT, nodeArgs },
          );
    children.push(target.child);
    const path = args.target === "rlgate" ? await rolloutChatPath(target.url) : "/v1/chat/completions";
    const fields = args.target === "proxy" ? { return_token_ids: true, logprobs: true } : {};
    const request = args["agent-sized"] ? agentSizedBody() : AGENT_BODY;
    const body = JSON.stringify({ ...request, stream: STREAM, ...fields });
    const pool = new Pool(target.url, { connections: 1 });
    const pid = target.child.pid!;
    process.stdout.write(`warming up (${WARMUP} calls)…`);
    await sendCalls(pool, path, body, WARMUP);
    const data = join(dir, "perf.data");
    const perf = spawn("perf", ["record", "-e", "cpu-clock", "-F", String(FREQ), "-g", "-p", String(pid), "-o", data], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let perfLog = "";
    perf.stderr!.on("data", (d: Buffer) => (perfLog += d.toString()));
    await new Promise((resolve) => setTimeout(resolve, 1000)); // perf attaches
    const before = processCpuSeconds(pid)!;
    process.stdout.write(` sampling ${CALLS} calls…`);
    await sendCalls(pool, path, body, CALLS);
    const cpuMsPerCall = ((processCpuSeconds(pid)! - before) * 1000) / CALLS;
    perf.kill("SIGINT");
    await new Promise((resolve) => perf.once("exit", resolve));
    await pool.close();
    const script = spawnSync("perf", ["script", "-i", data, "-F", "comm,pid,tid,time,period,event,ip,sym,dso"], {
      encoding: "utf8",
      maxBuffer: 2 ** 31 - 1,
    });
    if (script.status !== 0) throw new Error(`perf script failed: ${script.stderr}\n${perfLog}`);
    if (args["script-out"]) writeFileSync(args["script-out"], script.stdout);
    const counts = new Map<string, number>();
    let total = 0;
    for (const s of samples(script.stdout)) {
      const place = placeOf(s.tid === String(pid), s.frames, ROOT);
      counts.set(place, (counts.get(place) ?? 0) + 1);
      total++;
    }
    console.log(
      `\n\n${args.target}, ${STREAM ? "streamed" : "non-streamed"}${args["agent-sized"] ? ", agent-sized" : ""}: ${cpuMsPerCall.toFixed(3)} ms of CPU a call over ${CALLS} calls, ${total} samples; load average ${loadavg()[0]!.toFixed(2)}`,
    );
    console.log("place                                                     share     µs a call");
    const rows = [...counts].sort((a, b) => b[1] - a[1]);
    for (const [place, n] of rows.slice(0, Number(args.top)))
      console.log(
        `${place.padEnd(56)} ${((100 * n) / total).toFixed(1).padStart(5)}%  ${((n / total) * cpuMsPerCall * 1000).toFixed(0).padStart(8)}`,
      );
    const rest = rows.slice(Number(args.top)).reduce((sum, [, n]) => sum + n, 0);
    if (rest) console.log(`${"(the rest)".padEnd(56)} ${((100 * rest) / total).toFixed(1).padStart(5)}%`);
  } finally {
    for (const child of children) child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
