// bench:replicas — what rollout-sticky routing gives over round-robin when replicas cache prefixes. Three sims with
// the prefix-cache model (time to first token grows with the prompt tokens a replica has not cached as a prefix, like
// vLLM's automatic prefix caching) sit behind one rlgate; many multi-turn agent rollouts run at once, each turn's
// prompt the whole history plus a new tool result. Run once with sticky routing (each rollout on one replica) and once
// with round-robin (every call to the next replica, `serve --routing round-robin`, a bench-only baseline), each on
// fresh sims, and print time to first token and throughput side by side. Each sim and the gateway run as processes of
// their own, as in production (rendering and tokenizing long prompts costs the sims CPU).
//
//   npm run bench:replicas [-- --rollouts 48 --turns 8 --prefill-us 400 --tool-tokens 400]   (--quick: a short run)
//
// 400 µs a prompt token is ~2,500 prefill tokens/s per replica: a large model on one GPU, or an engine busy decoding.
// The engine is then the bottleneck, as in RL rollouts; at much lower values the sims' own CPU (rendering and
// tokenizing every prompt) dominates on a small machine and hides what routing does to the cache.
import { rmSync } from "node:fs";
import { parseArgs } from "node:util";
import { progressBar } from "../cli/progress.ts";
import type { Routing } from "../gateway/upstream/client.ts";
import { spawnCli, tempDir, TOOLS, type CliProcess } from "../test/helpers.ts";
import { percentile } from "../util/agreement.ts";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    rollouts: { type: "string" },
    turns: { type: "string" },
    replicas: { type: "string", default: "3" },
    "prefill-us": { type: "string", default: "400" },
    "tool-tokens": { type: "string", default: "400" },
    "system-tokens": { type: "string", default: "2000" },
  },
});
const ROLLOUTS = Number(args.rollouts ?? (args.quick ? 24 : 48));
const TURNS = Number(args.turns ?? (args.quick ? 6 : 8));
const REPLICAS = Number(args.replicas);
const PREFILL_US = Number(args["prefill-us"]);
const TOOL_TOKENS = Number(args["tool-tokens"]);
const SYSTEM_TOKENS = Number(args["system-tokens"]);

const WORDS = (
  "the of and to in is that for it as with was on be by this are from at or an have not they which one you were " +
  "all we can her has there been if more when will would who so no file line code test value error call return"
).split(" ");

/** Text of about `tokens` Qwen3 tokens (common words are one token each), in an order of its own for every seed. */
function filler(tokens: number, seed: string): string {
  let h = 2166136261;
  for (const c of seed) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  const words: string[] = [];
  for (let i = 0; i < tokens; i++) {
    h = Math.imul(h ^ i, 16777619) >>> 0;
    words.push(WORDS[h % WORDS.length]!);
  }
  return words.join(" ");
}

const SYSTEM = `You are a coding agent. Project notes:\n${filler(SYSTEM_TOKENS, "notes")}`;

interface RunFigures {
  routing: Routing;
  ttftMs: number[];
  calls: number;
  wallMs: number;
  cachedTokens: number;
  prefilledTokens: number;
}

/** One rollout: TURNS streamed calls, each its history plus a new tool result; the time to each first event. */
async function rollout(gatewayUrl: string, index: number, ttft: number[], tick: () => void): Promise<void> {
  const created = (await (
    await fetch(`${gatewayUrl}/api/rollouts`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ group: "bench", harness: "bench-agent" }),
    })
  ).json()) as { base_urls: { openai: string } };
  const messages: Array<Record<string, unknown>> = [
    { role: "system", content: SYSTEM },
    { role: "user", content: `Task ${index}: find what is wrong in module ${index}.` },
  ];
  for (let turn = 0; turn < TURNS; turn++) {
    const started = performance.now();
    const res = await fetch(`${created.base_urls.openai}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages, tools: TOOLS, stream: true, max_tokens: 64 }),
    });
    const reader = res.body!.getReader();
    let text = "";
    let first = true;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (first) {
        ttft.push(performance.now() - started);
        first = false;
      }
      text += Buffer.from(value).toString("utf8");
    }
    if (res.status !== 200 || !text.includes("data: [DONE]")) throw new Error(`call failed: ${res.status} ${text}`);
    // The history grows by a turn: the assistant's (short) answer and a tool result of TOOL_TOKENS new tokens.
    messages.push({ role: "assistant", content: `Looked at part ${turn}.` });
    messages.push({ role: "user", content: `Output of step ${turn}:\n${filler(TOOL_TOKENS, `r${index}t${turn}`)}` });
    tick();
  }
}

/** `rlgate …` as its own process (each sim and the gateway on a core of its own, as in production). */
async function spawnServer(args: string[]): Promise<{ url: string; process: CliProcess }> {
  const child = spawnCli(args);
  const [, url] = await child.waitFor(/listening on (http:\/\/\S+)/, 60_000);
  return { url: url!, process: child };
}

async function run(routing: Routing): Promise<RunFigures> {
  const sims = await Promise.all(
    Array.from({ length: REPLICAS }, () =>
      spawnServer(["sim", "--port", "0", "--prefill-us-per-token", String(PREFILL_US)]),
    ),
  );
  const dataDir = tempDir("bench-replicas");
  const gateway = await spawnServer([
    "serve",
    // One process: the comparison is of routing, not of workers sharing this machine's cores with the sims.
    "--workers",
    "1",
    "--port",
    "0",
    "--upstream",
    sims.map((s) => s.url).join(","),
    "--routing",
    routing,
    "--data",
    dataDir,
  ]);
  const ttftMs: number[] = [];
  const bar = progressBar(routing.padEnd(11), ROLLOUTS * TURNS);
  try {
    const started = performance.now();
    await Promise.all(Array.from({ length: ROLLOUTS }, (_, i) => rollout(gateway.url, i, ttftMs, bar.tick)));
    const wallMs = performance.now() - started;
    bar.stop();
    // Each sim tells its prefix cache's figures when it stops.
    let cachedTokens = 0;
    let prefilledTokens = 0;
    for (const sim of sims) {
      await sim.process.kill("SIGTERM");
      const [, cached, prefilled] = /prefix cache: (\d+) prompt tokens cached, (\d+) prefilled/.exec(
        sim.process.output(),
      )!;
      cachedTokens += Number(cached);
      prefilledTokens += Number(prefilled);
    }
    return { routing, ttftMs, calls: ttftMs.length, wallMs, cachedTokens, prefilledTokens };
  } finally {
    bar.stop();
    await gateway.process.kill("SIGTERM");
    await Promise.all(sims.map((s) => s.process.kill()));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function summary(f: RunFigures) {
  const sorted = [...f.ttftMs].sort((a, b) => a - b);
  return {
    mean: sorted.reduce((a, b) => a + b, 0) / sorted.length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    callsPerS: f.calls / (f.wallMs / 1000),
    hit: f.cachedTokens / (f.cachedTokens + f.prefilledTokens),
    promptTokens: (f.cachedTokens + f.prefilledTokens) / f.calls,
    prefilledPerCall: f.prefilledTokens / f.calls,
  };
}

console.log(
  `bench:replicas — ${REPLICAS} sims (prefix cache, ${PREFILL_US} µs per uncached prompt token), ${ROLLOUTS} concurrent ` +
    `rollouts × ${TURNS} streamed turns (~${SYSTEM_TOKENS}-token shared system prompt, +~${TOOL_TOKENS} tokens a turn)`,
);
const sticky = summary(await run("sticky"));
const roundRobin = summary(await run("round-robin"));
const ms = (v: number) => `${v.toFixed(1)} ms`.padStart(10);
const row = (name: string, s: ReturnType<typeof summary>) =>
  `${name.padEnd(13)}${ms(s.mean)}${ms(s.p50)}${ms(s.p99)}${s.callsPerS.toFixed(1).padStart(10)}${`${(s.hit * 100).toFixed(1)}%`.padStart(12)}`;
console.log(
  `\n${"routing".padEnd(13)}${"TTFT mean".padStart(10)}${"p50".padStart(10)}${"p99".padStart(10)}${"calls/s".padStart(10)}${"cache hits".padStart(12)}`,
);
console.log(row("sticky", sticky));
console.log(row("round-robin", roundRobin));
const x = (v: number) => `${v.toFixed(2)}×`.padStart(10);
console.log(
  `${"rr / sticky".padEnd(13)}${x(roundRobin.mean / sticky.mean)}${x(roundRobin.p50 / sticky.p50)}${x(roundRobin.p99 / sticky.p99)}${x(sticky.callsPerS / roundRobin.callsPerS)}`,
);
console.log(
  `(TTFT: round-robin's over sticky's; calls/s: sticky's over round-robin's; cache hits: of ${sticky.promptTokens.toFixed(0)} ` +
    `prompt tokens a call on average; prefilled a call: sticky ${sticky.prefilledPerCall.toFixed(0)}, round-robin ` +
    `${roundRobin.prefilledPerCall.toFixed(0)})`,
);
