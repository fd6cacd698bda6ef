// Trajectory reconstruction: the prefix tree against the naive reconstruction (every prompt compared with every
// earlier call), on synthetic agent sessions of 10–100 turns whose prompts grow to 8k–64k tokens by appending tool
// outputs. Prints time (best of up to 7 runs) and peak memory, each implementation in its own fresh process, and stored bytes ÷ (4 B × unique tokens)
// when a prompt is stored as a reference to its deepest match plus its new tokens.
// Usage: npm run bench:trajectory [-- --quick]
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { naiveReconstruct } from "../trajectory/naive.ts";
import { reconstructRollout } from "../trajectory/reconstruct.ts";
import type { CallTokens, Reconstruction } from "../trajectory/types.ts";

type Shape = "linear" | "reserializing" | "mixed";
interface Case {
  shape: Shape;
  turns: number;
  maxPrompt: number;
}

const IM_START = 151644;
const IM_END = 151645;
const SYSTEM = 8948;
const SYSTEM_TOKENS = 1500;
const COMPLETION = 300;

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function fill(buffer: Int32Array, from: number, to: number, rand: () => number): void {
  for (let i = from; i < to; i++) buffer[i] = 1000 + Math.floor(rand() * 150_000);
}

function logprobs(n: number, rand: () => number): Float32Array {
  return Float32Array.from({ length: n }, () => -rand() * 3);
}

function call(callSeq: number, prompt: Int32Array, completion: Int32Array, rand: () => number): CallTokens {
  return {
    callSeq,
    promptIds: prompt,
    choices: [{ index: 0, tokenIds: completion, logprobs: logprobs(completion.length, rand), finishReason: "stop" }],
    tokenSource: "upstream",
    status: "ok",
    startedAt: callSeq,
  };
}

/**
 * One session. Prompts are prefixes of one rendered conversation (views, no copies): system turn, task, then per turn
 * the assistant turn and a tool output sized so the last prompt reaches `maxPrompt`.
 * - linear: the history renders each completion exactly as sampled (one trajectory);
 * - reserializing: the history renders each completion without its first third (reasoning stripped), so every turn
 *   is its own leaf;
 * - mixed: linear, plus a retry every 10th turn (a dead leaf) and a 4-turn sub-agent every 25 turns.
 */
function session({ shape, turns, maxPrompt }: Case, seed = 1): CallTokens[] {
  const rand = rng(seed);
  const head = SYSTEM_TOKENS + 200;
  const growth = Math.floor((maxPrompt - head) / turns);
  const completionTokens = Math.min(COMPLETION, Math.floor(growth / 2));
  const conversation = new Int32Array(head + turns * growth + 16);
  fill(conversation, 0, head, rand);
  conversation.set([IM_START, SYSTEM], 0);
  conversation[SYSTEM_TOKENS] = IM_END;
  conversation[SYSTEM_TOKENS + 1] = IM_START;
  let length = head;
  const calls: CallTokens[] = [];
  let seq = 0;
  for (let turn = 0; turn < turns; turn++) {
    const prompt = conversation.subarray(0, length);
    const completion = new Int32Array(completionTokens);
    fill(completion, 0, completionTokens, rand);
    completion[completionTokens - 1] = IM_END;
    if (shape === "mixed" && turn % 10 === 5) {
      const rejected = new Int32Array(completionTokens);
      fill(rejected, 0, completionTokens, rand);
      calls.push(call(++seq, prompt, rejected, rand));
    }
    calls.push(call(++seq, prompt, completion, rand));
    if (shape === "mixed" && turn % 25 === 10) {
      const sub = new Int32Array(4 * (COMPLETION + 400) + 400);
      fill(sub, 0, sub.length, rand);
      sub.set([IM_START, SYSTEM], 0);
      sub[300] = IM_END;
      for (let k = 0; k < 4; k++) {
        const end = 400 + k * (COMPLETION + 400);
        calls.push(call(++seq, sub.subarray(0, end), sub.subarray(end, end + COMPLETION), rand));
      }
    }
    const rendered = shape === "reserializing" ? completion.subarray(Math.floor(completionTokens / 3)) : completion;
    conversation.set(rendered, length);
    length += rendered.length;
    const tool = growth - rendered.length;
    fill(conversation, length, length + tool, rand);
    conversation[length] = IM_START;
    length += tool;
  }
  return calls;
}

function gc(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

function run(impl: "tree" | "naive", calls: CallTokens[]): Reconstruction {
  return impl === "tree"
    ? reconstructRollout(calls, { rolloutId: "bench" })
    : naiveReconstruct(calls, { rolloutId: "bench" });
}

interface Measured {
  /** Best of up to 7 runs after the first, milliseconds. */
  ms: number;
  /** Peak RSS above the baseline during the first run, bytes. */
  peak: number;
}

/** Time and peak memory of one implementation on one case, in a fresh process (no GC debt from the other). */
function measure(c: Case, impl: "tree" | "naive"): Measured {
  const self = fileURLToPath(import.meta.url);
  const out = spawnSync(
    process.execPath,
    ["--expose-gc", "--import", "tsx", self, "--child", c.shape, String(c.turns), String(c.maxPrompt), impl],
    {
      encoding: "utf8",
    },
  );
  if (out.status !== 0) throw new Error(out.stderr);
  return JSON.parse(out.stdout) as Measured;
}

// Peak memory: RSS sampled from a worker thread every ~0.2 ms while the main thread reconstructs, above the RSS
// measured just before (after a warm-up run on a small case, so compiling the code is not counted, and a full GC).
const SAMPLER = `
const { workerData } = require("node:worker_threads");
const peak = new Int32Array(workerData);
while (Atomics.load(peak, 1) === 0) {
  const mb = Math.ceil(process.memoryUsage.rss() / 65536);
  if (mb > peak[0]) Atomics.store(peak, 0, mb);
  Atomics.wait(peak, 1, 0, 0.2);
}
`;

async function child(args: string[]): Promise<void> {
  const { Worker } = await import("node:worker_threads");
  const [shape, turns, maxPrompt, impl] = args as [Shape, string, string, "tree" | "naive"];
  run(impl, session({ shape, turns: 10, maxPrompt: 8192 }, 7));
  const calls = session({ shape, turns: Number(turns), maxPrompt: Number(maxPrompt) });
  const shared = new SharedArrayBuffer(8);
  const peak = new Int32Array(shared);
  const sampler = new Worker(SAMPLER, { eval: true, workerData: shared });
  await new Promise((resolve) => setTimeout(resolve, 50));
  gc();
  const base = process.memoryUsage.rss();
  Atomics.store(peak, 0, Math.ceil(base / 65536));
  await new Promise((resolve) => setTimeout(resolve, 5));
  run(impl, calls);
  const end = process.memoryUsage.rss();
  Atomics.store(peak, 1, 1);
  await sampler.terminate();
  const top = Math.max(peak[0]! * 65536, end);
  const samples: number[] = [];
  const started = performance.now();
  do {
    const t0 = performance.now();
    run(impl, calls);
    samples.push(performance.now() - t0);
  } while (samples.length < 7 && performance.now() - started < 4000);
  const measured: Measured = { ms: Math.min(...samples), peak: Math.max(0, top - base) };
  process.stdout.write(JSON.stringify(measured));
}

/** Stored bytes: per call its new prompt tokens and sampled ids (4 B each) plus a 12 B reference; per sampled id 4 B of logprob. */
function stored(rec: Reconstruction): { ids: number; withLogprobs: number; full: number } {
  let ids = 0;
  let sampled = 0;
  let full = 0;
  for (const c of rec.calls) {
    const a = c.attach;
    if (a === null) continue;
    const n = c.choices.reduce((s, x) => s + x.sampledTokens, 0);
    ids += 12 + 4 * (a.promptTokens - a.matchedTokens + n);
    sampled += n;
    full += 4 * (a.promptTokens + n);
  }
  const unique = 4 * rec.stats.uniqueTokens;
  return { ids: ids / unique, withLogprobs: (ids + 4 * sampled) / unique, full: full / unique };
}

function pad(s: string | number, n: number): string {
  return String(s).padStart(n);
}

function main(): void {
  const quick = process.argv.includes("--quick");
  const cases: Case[] = [];
  for (const turns of quick ? [10, 100] : [10, 25, 50, 100]) {
    for (const maxPrompt of quick ? [8192, 65536] : [8192, 32768, 65536])
      cases.push({ shape: "linear", turns, maxPrompt });
  }
  for (const shape of ["reserializing", "mixed"] as const) {
    for (const maxPrompt of quick ? [65536] : [8192, 65536]) cases.push({ shape, turns: 100, maxPrompt });
  }
  const header =
    `${pad("shape", 13)} ${pad("turns", 5)} ${pad("prompt", 6)} ${pad("calls", 5)} ${pad("unique", 7)} ${pad("Σprompts", 8)} ${pad("traj", 4)} ` +
    `${pad("tree ms", 8)} ${pad("naive ms", 9)} ${pad("speedup", 7)} ${pad("tree MB", 7)} ${pad("naive MB", 8)} ${pad("mem ×", 6)} ` +
    `${pad("stored/4u", 9)} ${pad("+logprobs", 9)} ${pad("full/4u", 8)}`;
  console.log(header);
  console.log("-".repeat(header.length));
  let target: number | null = null;
  for (const c of cases) {
    const calls = session(c);
    const rec = run("tree", calls);
    const tree = measure(c, "tree");
    const naive = measure(c, "naive");
    const [treeMs, naiveMs] = [tree.ms, naive.ms];
    const [treeMb, naiveMb] = [tree.peak / 2 ** 20, naive.peak / 2 ** 20];
    const s = stored(rec);
    const promptSum = calls.reduce((n, x) => n + (x.promptIds?.length ?? 0), 0);
    if (c.shape === "linear" && c.turns === 100 && c.maxPrompt === 65536) target = treeMs;
    console.log(
      `${pad(c.shape, 13)} ${pad(c.turns, 5)} ${pad(`${c.maxPrompt / 1024}k`, 6)} ${pad(calls.length, 5)} ${pad(rec.stats.uniqueTokens, 7)} ` +
        `${pad(promptSum, 8)} ${pad(rec.trajectories.length, 4)} ${pad(treeMs.toFixed(1), 8)} ${pad(naiveMs.toFixed(1), 9)} ` +
        `${pad(`${(naiveMs / treeMs).toFixed(1)}×`, 7)} ${pad(treeMb.toFixed(1), 7)} ${pad(naiveMb.toFixed(1), 8)} ` +
        `${pad(`${(naiveMb / Math.max(treeMb, 0.1)).toFixed(1)}×`, 6)} ${pad(s.ids.toFixed(3), 9)} ${pad(s.withLogprobs.toFixed(3), 9)} ${pad(s.full.toFixed(1), 8)}`,
    );
  }
  if (target !== null) {
    console.log(
      `\ntarget: 100-turn rollout with 64k-token prompts reconstructs in ≤ 100 ms: ${target.toFixed(1)} ms ${target <= 100 ? "PASS" : "FAIL"}`,
    );
  }
  console.log(
    "stored/4u: bytes of ids + references ÷ (4 B × unique tokens), target ≤ 1.5; full/4u: storing every prompt whole.",
  );
}

const childAt = process.argv.indexOf("--child");
if (childAt >= 0) await child(process.argv.slice(childAt + 1));
else main();
