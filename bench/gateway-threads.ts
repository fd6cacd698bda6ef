// bench/gateway-threads.ts — one target's CPU per call split by thread (/proc/PID/task): the main thread, where the
// relay, capture and commit run, and the others (V8's garbage collection and compiler helpers, libuv, the trajectory
// worker). A process's CPU per call in bench/gateway-cpu.ts sums them; this says which thread spends it.
//
//   npx tsx bench/gateway-threads.ts                      rlgate serve (this checkout)
//   npx tsx bench/gateway-threads.ts --target frame       bench/frame-forwarder.ts (rlgate's HTTP frame, no capture)
//   npx tsx bench/gateway-threads.ts --target proxy       bench/bare-forwarder.ts (http-proxy)
//   npx tsx bench/gateway-threads.ts --dir DIR --calls N  rlgate serve from the checkout DIR
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { Pool } from "undici";
import { spawnListening } from "./spawn-listening.ts";
import { threadCpuMs } from "./process-cpu.ts";
import { AGENT_BODY, rolloutChatPath, sendCalls } from "./agent-calls.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const { values: args } = parseArgs({
  options: {
    target: { type: "string", default: "rlgate" },
    dir: { type: "string" },
    calls: { type: "string", default: "1500" },
  },
});
const CALLS = Number(args.calls);
const SCRIPTS: Record<string, string> = { frame: "bench/frame-forwarder.ts", proxy: "bench/bare-forwarder.ts" };
if (args.target !== "rlgate" && !SCRIPTS[args.target!]) throw new Error("--target is rlgate, frame or proxy");

async function main(): Promise<void> {
  const data = mkdtempSync(join(tmpdir(), "rlgate-threads-"));
  const children: ChildProcess[] = [];
  try {
    const sim = await spawnListening(["cli/index.ts", "sim", "--port", "0"], "sim", { cwd: ROOT });
    children.push(sim.child);
    const rlgate = args.target === "rlgate";
    const server = rlgate
      ? await spawnListening(
          ["cli/index.ts", "serve", "--workers", "1", "--upstream", sim.url, "--port", "0", "--data", data],
          "rlgate",
          { cwd: args.dir ? resolve(args.dir) : ROOT },
        )
      : await spawnListening([SCRIPTS[args.target!]!, sim.url], args.target!, { cwd: ROOT });
    children.push(server.child);
    const path = rlgate ? await rolloutChatPath(server.url) : "/v1/chat/completions";
    // The forwarders ask for what rlgate adds, so the sim answers the same bytes behind each.
    const ids = rlgate ? {} : { return_token_ids: true, logprobs: true };
    const pool = new Pool(server.url, { connections: 1 });
    const send = (count: number, stream: boolean) =>
      sendCalls(pool, path, JSON.stringify({ ...AGENT_BODY, stream, ...ids }), count);
    console.log(`${args.target}: ${CALLS} calls at concurrency 1, load average ${loadavg()[0]!.toFixed(2)}`);
    for (const stream of [true, false]) {
      await send(500, stream); // warm-up
      const before = threadCpuMs(server.child.pid!);
      await send(CALLS, stream);
      const after = threadCpuMs(server.child.pid!);
      let others = 0;
      for (const [thread, ms] of after) if (thread !== "main") others += ms - (before.get(thread) ?? 0);
      const main = (after.get("main") ?? 0) - (before.get("main") ?? 0);
      const perCall = (ms: number) => ((ms * 1000) / CALLS).toFixed(0).padStart(5);
      console.log(
        `  ${stream ? "streamed    " : "non-streamed"}  main thread ${perCall(main)} µs/call, other threads ${perCall(others)} µs/call`,
      );
    }
    console.log(`  load average ${loadavg()[0]!.toFixed(2)} at the end`);
    await pool.close();
  } finally {
    for (const child of children) child.kill("SIGTERM");
    rmSync(data, { recursive: true, force: true });
  }
}

await main();
