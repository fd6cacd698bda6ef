// bench:gateway — the same simulated vLLM (no artificial latency) reached three ways in one run: directly, through a
// bare http-proxy forwarder, and through rlgate with durable capture on. Prints p50/p99 latency, requests/s and the
// differences, for non-streamed calls (full latency) and streamed calls (time to first byte and full latency).
//
//   npm run bench:gateway               default run (~1–2 min)
//   npm run bench:gateway -- --quick    a few hundred requests, to check that the bench works
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Pool } from "undici";

const ROOT = new URL("..", import.meta.url).pathname;
const quick = process.argv.includes("--quick");
const CONCURRENCIES = quick ? [1, 8] : [1, 8, 32];
const REQUESTS = quick ? 60 : 1500;
const WARMUP = quick ? 10 : 200;

interface Target {
  name: string;
  url: string;
}

function spawnListening(args: string[], what: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  return new Promise((resolve, reject) => {
    let out = "";
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/[^\s/]+)/.exec(out);
      if (match) resolve({ child, url: match[1]! });
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    child.once("exit", (code) => reject(new Error(`${what} exited (${code}): ${out}`)));
  });
}

const BODY = {
  model: "Qwen/Qwen3-8B",
  messages: [
    { role: "system", content: "You are a coding agent." },
    { role: "user", content: "What is in this directory?" },
  ],
  max_tokens: 64,
};

interface Sample {
  ttfb: number;
  total: number;
}

async function one(pool: Pool, stream: boolean): Promise<Sample> {
  const start = performance.now();
  const res = await pool.request({
    method: "POST",
    path: "/v1/chat/completions",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...BODY, stream }),
  });
  let ttfb = -1;
  for await (const _chunk of res.body) {
    if (ttfb < 0) ttfb = performance.now() - start;
  }
  if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
  return { ttfb, total: performance.now() - start };
}

async function run(target: Target, concurrency: number, stream: boolean): Promise<{ samples: Sample[]; rps: number }> {
  const pool = new Pool(target.url, { connections: concurrency, pipelining: 1 });
  const samples: Sample[] = [];
  let next = 0;
  const worker = async (count: number, keep: boolean) => {
    while (next < count) {
      next++;
      const s = await one(pool, stream);
      if (keep) samples.push(s);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, () => worker(WARMUP, false)));
  next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, () => worker(REQUESTS, true)));
  const seconds = (performance.now() - start) / 1000;
  await pool.close();
  return { samples, rps: samples.length / seconds };
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function fmt(n: number, digits = 2): string {
  return n.toFixed(digits).padStart(8);
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "rlgate-bench-"));
  const children: ChildProcess[] = [];
  try {
    const sim = await spawnListening(["cli/index.ts", "sim", "--port", "0"], "sim");
    children.push(sim.child);
    const bare = await spawnListening(["bench/bare-forwarder.ts", sim.url], "bare forwarder");
    children.push(bare.child);
    const gateway = await spawnListening(["cli/index.ts", "serve", "--upstream", sim.url, "--port", "0", "--data", dataDir], "gateway");
    children.push(gateway.child);
    const targets: Target[] = [
      { name: "direct", url: sim.url },
      { name: "http-proxy", url: bare.url },
      { name: "rlgate", url: gateway.url },
    ];

    console.log(`bench:gateway — ${REQUESTS} requests per cell after ${WARMUP} warm-up, sim upstream without artificial latency`);
    console.log("each process (sim, forwarder, gateway, load) is separate; figures in milliseconds\n");
    for (const stream of [false, true]) {
      console.log(stream ? "STREAMED (ttfb = first body byte)" : "NON-STREAMED");
      console.log(
        "conc  target        p50      p99   ttfb50   ttfb99     req/s   +p50 vs direct  +p99 vs direct  rps vs proxy",
      );
      for (const concurrency of CONCURRENCIES) {
        const results = new Map<string, { p50: number; p99: number; t50: number; t99: number; rps: number }>();
        for (const target of targets) {
          const { samples, rps } = await run(target, concurrency, stream);
          const totals = samples.map((s) => s.total);
          const ttfbs = samples.map((s) => s.ttfb);
          results.set(target.name, {
            p50: quantile(totals, 0.5),
            p99: quantile(totals, 0.99),
            t50: quantile(ttfbs, 0.5),
            t99: quantile(ttfbs, 0.99),
            rps,
          });
        }
        const direct = results.get("direct")!;
        const proxy = results.get("http-proxy")!;
        for (const [name, r] of results) {
          const added = name === "direct" ? "" : `${fmt(r.p50 - direct.p50, 3)}        ${fmt(r.p99 - direct.p99, 3)}`;
          const ratio = name === "direct" ? "" : `      ${(r.rps / proxy.rps).toFixed(2)}x`;
          console.log(
            `${String(concurrency).padStart(4)}  ${name.padEnd(10)} ${fmt(r.p50)} ${fmt(r.p99)} ${fmt(r.t50)} ${fmt(r.t99)} ${fmt(r.rps, 0)}   ${added.padEnd(30)}${ratio}`,
          );
        }
      }
      console.log("");
    }
    console.log("targets (design): added p50 ≤ 0.5 ms, added p99 ≤ 1 ms, throughput ≥ the bare forwarder's (rps vs proxy ≥ 1.00x)");
  } finally {
    for (const child of children) child.kill("SIGTERM");
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
