// bench/gateway-profile.ts — where a captured call's CPU goes inside the gateway, step by step. Runs the simulated vLLM
// and `rlgate serve` under `node --cpu-prof`, sends calls at concurrency 1 (streamed, then non-streamed, each after an
// idle second that marks it in the profile), and reads the profile back: each sample is charged to the innermost frame
// that names a step of the call (request parsed, attribution, forwarding, event scan, record, commit, harness write,
// ...), and the samples of each phase are divided by its calls. A sampling profile of one process is not disturbed by
// other processes on the machine the way cross-process CPU figures are, so it compares code before and after a change.
//
//   npx tsx bench/gateway-profile.ts                        2 × 4000 calls (~1 min)
//   npx tsx bench/gateway-profile.ts --calls 1000 --keep DIR   fewer calls; keep the .cpuprofile (open it in Chrome's
//                                                              DevTools or speedscope for the flame graph)
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, cpSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Pool } from "undici";
import { profileSteps, printSteps, type Profile } from "./profile-steps.ts";
import { spawnListening } from "./spawn-listening.ts";
import { AGENT_BODY, rolloutChatPath, sendCalls } from "./agent-calls.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const { values: args } = parseArgs({
  options: {
    calls: { type: "string", default: "4000" },
    keep: { type: "string" },
    help: { type: "boolean", short: "h" },
  },
});
if (args.help) {
  console.log(`usage: tsx bench/gateway-profile.ts [--calls N] [--keep DIR]

Profiles rlgate serve (node --cpu-prof) under N streamed then N non-streamed calls at concurrency 1 from the
simulated vLLM, and prints the CPU µs per call of each step of the call. --keep DIR copies the .cpuprofile there.`);
  process.exit(0);
}
const CALLS = Number(args.calls);
if (!Number.isInteger(CALLS) || CALLS < 10) throw new Error(`--calls must be an integer ≥ 10, got ${args.calls}`);

const idle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-profile-"));
  const children: ChildProcess[] = [];
  try {
    const sim = await spawnListening(["cli/index.ts", "sim", "--port", "0"], "sim", { cwd: ROOT });
    children.push(sim.child);
    const gateway = await spawnListening(
      ["cli/index.ts", "serve", "--workers", "1", "--upstream", sim.url, "--port", "0", "--data", join(dir, "data")],
      "gateway",
      { cwd: ROOT, nodeArgs: ["--cpu-prof", "--cpu-prof-dir", join(dir, "prof")] },
    );
    children.push(gateway.child);
    const path = await rolloutChatPath(gateway.url);
    const pool = new Pool(gateway.url, { connections: 1, pipelining: 1 });
    const streamed = JSON.stringify({ ...AGENT_BODY, stream: true });
    const whole = JSON.stringify(AGENT_BODY);
    // Warm-up (JIT), then each measured phase between idle seconds: the profile's long idle runs delimit them.
    await sendCalls(pool, path, streamed, 1000);
    await sendCalls(pool, path, whole, 1000);
    await idle(1200);
    await sendCalls(pool, path, streamed, CALLS);
    await idle(1200);
    await sendCalls(pool, path, whole, CALLS);
    await idle(1200);
    await pool.close();
    const exited = new Promise((resolve) => gateway.child.once("exit", resolve));
    gateway.child.kill("SIGTERM");
    await exited;
    const file = readdirSync(join(dir, "prof")).find((name) => name.endsWith(".cpuprofile"));
    if (!file) throw new Error("the gateway wrote no .cpuprofile");
    const profile = JSON.parse(readFileSync(join(dir, "prof", file), "utf8")) as Profile;
    if (args.keep) {
      mkdirSync(args.keep, { recursive: true });
      cpSync(join(dir, "prof", file), join(args.keep, "gateway.cpuprofile"));
    }
    const phases = profileSteps(profile, ["streamed", "non-streamed"]);
    console.log(`bench:gateway-profile — ${CALLS} calls a phase, concurrency 1, rlgate serve under node --cpu-prof`);
    for (const phase of phases) printSteps(phase, CALLS);
  } finally {
    for (const child of children) child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
