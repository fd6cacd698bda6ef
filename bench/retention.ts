// bench:retention — what `serve --retain` and `rlgate store backup` cost on a store of synthetic agent rollouts:
//   - the sweep's time per 1,000 rollouts (all finished, acknowledged and past the window), its transactions, and how
//     long a call's commit waited meanwhile (a harness's calls keep arriving: each is put and awaited in a loop, with
//     and without a sweep running, side by side);
//   - `rlgate store backup` (a child process, as a user runs it beside a gateway): wall time and copy size, compacted
//     and not, against the store's file;
//   - `rlgate store stats`' wall time.
// Each rollout: --turns calls whose prompts grow by the sampled answer and a tool result (one trajectory), bodies
// growing with them (stored as references to the previous body), token ids drawn from a seeded generator.
//
//   npm run bench:retention [-- --rollouts 2000 --turns 8 --prompt 2000]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { RawJson, type RolloutRecord } from "../store/records.ts";
import { sweepRetention } from "../store/retention.ts";
import { Store } from "../store/store.ts";
import { testCallRecord } from "../store/test-support.ts";
import { PromptIndex } from "../trajectory/prompt-index.ts";

const { values: args } = parseArgs({
  options: {
    rollouts: { type: "string", default: "2000" },
    turns: { type: "string", default: "8" },
    prompt: { type: "string", default: "2000" },
  },
});
const ROLLOUTS = Number(args.rollouts);
const TURNS = Number(args.turns);
const PROMPT = Number(args.prompt);
const ROOT = new URL("..", import.meta.url).pathname;

let seed = 1;
function random(): number {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const ids = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 151_000));

async function agentRollout(store: Store, id: string, finish: boolean): Promise<number> {
  const record: RolloutRecord = {
    ...{ id, key: `k-${id}`, group: "bench", task: "t", harness: "h", metadata: {} },
    ...{ status: "open", reward: null, createdAt: Date.now(), finishedAt: null },
  };
  await store.putRollout(record);
  let prompt = ids(PROMPT);
  const messages = [{ role: "user", content: "x".repeat(PROMPT * 4) }];
  for (let turn = 0; turn < TURNS; turn++) {
    const sampled = ids(200);
    const body = JSON.stringify({ model: "m", messages });
    await store.putCall(
      testCallRecord({
        seq: store.nextCallSeq(),
        rolloutId: id,
        requestReceived: new RawJson(body),
        requestForwarded: new RawJson(body),
        response: { choices: [{ message: { content: "y".repeat(800) } }] },
        promptTokenIds: prompt,
        choices: [{ index: 0, tokenIds: sampled, logprobs: sampled.map(() => -random()), finishReason: "stop" }],
      }),
    );
    prompt = [...prompt, ...sampled, ...ids(50)];
    messages.push({ role: "assistant", content: "y".repeat(800) }, { role: "tool", content: "z".repeat(200) });
  }
  return finish ? store.finishRollout({ ...record, status: "ok", reward: 1, finishedAt: Date.now() }) : 0;
}

/** A harness's calls into an open rollout, one after another, for as long as `running()`: each commit's wait (ms). */
async function callWaits(store: Store, running: () => boolean, min = 50): Promise<number[]> {
  const waits: number[] = [];
  const id = `live-${Math.floor(random() * 1e9)}`;
  await store.putRollout({
    ...{ id, key: `k-${id}`, group: "live", task: null, harness: null, metadata: {} },
    ...{ status: "open", reward: null, createdAt: Date.now(), finishedAt: null },
  });
  while (running() || waits.length < min) {
    const started = performance.now();
    await store.putCall(
      testCallRecord({ seq: store.nextCallSeq(), rolloutId: id, promptTokenIds: ids(64), choices: [] }),
    );
    waits.push(performance.now() - started);
  }
  return waits;
}

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;
const ms = (x: number) => `${x.toFixed(2)} ms`;
const mb = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(1)} MB`;

function cli(args: string[]): { wallS: number; stdout: string; stderr: string } {
  const started = performance.now();
  const run = spawnSync(process.execPath, ["--import", "tsx", "cli/index.ts", ...args], {
    cwd: ROOT,
    encoding: "utf8",
  });
  if (run.status !== 0) throw new Error(`rlgate ${args.join(" ")}: ${run.stderr}`);
  return { wallS: (performance.now() - started) / 1000, stdout: run.stdout, stderr: run.stderr };
}

const dir = mkdtempSync(join(tmpdir(), "rlgate-bench-retention-"));
const backups = mkdtempSync(join(tmpdir(), "rlgate-bench-backup-"));
const store = new Store({ path: join(dir, "data"), promptIndex: new PromptIndex() });
try {
  let t = performance.now();
  let last = 0;
  for (let r = 0; r < ROLLOUTS; r++) last = await agentRollout(store, `r${r}`, true);
  await store.writeConsumerState("cores", {
    committed: last,
    leases: new Map(),
    acked: new Map(),
    affinity: new Map(),
  });
  await store.committed();
  const calls = store.tables().calls.getCount();
  const file = statSync(join(dir, "data", "data.mdb")).size;
  console.log(
    `store: ${ROLLOUTS} rollouts × ${TURNS} calls (${calls} calls, first prompt ${PROMPT} tokens), file ${mb(file)}, written in ${((performance.now() - t) / 1000).toFixed(1)} s`,
  );

  const stats = cli(["store", "stats", "--data", join(dir, "data"), "--retain", "0"]);
  console.log(`store stats: ${stats.wallS.toFixed(2)} s wall (a child process, tsx start-up included)`);
  for (const compact of [true, false]) {
    const target = join(backups, compact ? "compact" : "plain");
    const run = cli(["store", "backup", target, "--data", join(dir, "data"), ...(compact ? [] : ["--no-compact"])]);
    const size = statSync(join(target, "data.mdb")).size;
    console.log(
      `store backup${compact ? "" : " --no-compact"}: ${mb(size)} (${(size / file).toFixed(2)} × the file), ${run.stderr.trim().split("\n").at(-1)}; ${run.wallS.toFixed(2)} s wall with start-up`,
    );
  }

  let sweeping = false;
  const idle = await callWaits(store, () => false, 2000);
  sweeping = true;
  const during = callWaits(store, () => sweeping);
  t = performance.now();
  const swept = await sweepRetention(store.tables(), 0, Date.now() + 1000);
  sweeping = false;
  const sweepMs = performance.now() - t;
  const waits = await during;
  console.log(
    `sweep: ${swept.rollouts} rollouts, ${swept.calls} calls in ${(sweepMs / 1000).toFixed(2)} s = ${ms((sweepMs / swept.rollouts) * 1000)} per 1,000 rollouts, ${swept.transactions} transactions`,
  );
  console.log(
    `a call's commit, alone: p50 ${ms(pct(idle, 0.5))} p99 ${ms(pct(idle, 0.99))} max ${ms(Math.max(...idle))} (${idle.length} calls)`,
  );
  console.log(
    `a call's commit, during the sweep: p50 ${ms(pct(waits, 0.5))} p99 ${ms(pct(waits, 0.99))} max ${ms(Math.max(...waits))} (${waits.length} calls)`,
  );
  const after = statSync(join(dir, "data", "data.mdb")).size;
  const left = store.tables().calls.getCount();
  console.log(`after the sweep: ${left} calls left (the live rollouts'), file ${mb(after)} (freed pages are reused)`);
  t = performance.now();
  for (let r = 0; r < ROLLOUTS; r++) await agentRollout(store, `again${r}`, false);
  console.log(
    `the same ${ROLLOUTS} rollouts written again: file ${mb(statSync(join(dir, "data", "data.mdb")).size)} (was ${mb(file)})`,
  );
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  rmSync(backups, { recursive: true, force: true });
}
