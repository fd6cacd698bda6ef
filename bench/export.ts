// bench:export — `rlgate export` of a store of synthetic agent rollouts to JSONL (the baseline) and to Parquet, in one
// run: wall seconds, bytes and peak memory of the CLI process, and how long DuckDB takes to sum the trained tokens of
// each file (what a trainer-side reader pays). Parquet runs twice: with the default row-group budget and with the
// whole export in one row group, to show what the budget does to memory.
//
// Each rollout: --turns turns whose prompts grow by the sampled answer and a tool result (one trajectory), token ids
// and logprobs drawn from a seeded generator so that compression sees realistic entropy.
//
//   npm run bench:export [-- --rollouts 100 --turns 20]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { RolloutRecord } from "../store/records.ts";
import { Store } from "../store/store.ts";
import { testCallRecord } from "../store/test-support.ts";

const { values: args } = parseArgs({
  options: { rollouts: { type: "string", default: "100" }, turns: { type: "string", default: "20" } },
});
const ROLLOUTS = Number(args.rollouts);
const TURNS = Number(args.turns);
const ROOT = new URL("..", import.meta.url).pathname;

// mulberry32: a seeded generator in 32-bit integer arithmetic.
let seed = 1;
function random(): number {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const ids = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 151_000));

async function rollout(store: Store, id: string): Promise<void> {
  const open: RolloutRecord = {
    ...{ id, key: `k-${id}`, group: "bench", task: "t", harness: "h", metadata: {} },
    ...{ status: "open", reward: null, createdAt: Date.now(), finishedAt: null },
  };
  await store.putRollout(open);
  let prompt = ids(1500);
  for (let t = 0; t < TURNS; t++) {
    const sampled = ids(300);
    const logprobs = sampled.map(() => Math.fround(Math.log(0.05 + 0.95 * random())));
    const choices = [{ index: 0, tokenIds: sampled, logprobs, finishReason: "stop" }];
    await store.putCall(testCallRecord({ rolloutId: id, seq: store.nextCallSeq(), promptTokenIds: prompt, choices }));
    prompt = [...prompt, ...sampled, ...ids(640)];
  }
  await store.finishRollout({ ...open, status: "ok", reward: random(), finishedAt: Date.now() });
}

/** The CLI's wall seconds and peak resident memory (GNU time), its summary line. */
function exportRun(dataDir: string, out: string, extra: string[] = []): { seconds: number; rssMb: number } {
  const cli = [process.execPath, "--import", "tsx", "cli/index.ts", "export", "--group", "bench", "--data", dataDir];
  const run = spawnSync("/usr/bin/time", ["-f", "TIME %e %M", ...cli, "-o", out, ...extra], {
    cwd: ROOT,
    encoding: "utf8",
  });
  if (run.status !== 0) throw new Error(`export failed: ${run.stderr}`);
  const [, seconds, kb] = /TIME (\S+) (\d+)/.exec(run.stderr) ?? [];
  return { seconds: Number(seconds), rssMb: Number(kb) / 1024 };
}

async function duckdbSeconds(from: string): Promise<{ seconds: number; trained: number }> {
  const { DuckDBInstance } = await import("@duckdb/node-api");
  const db = await DuckDBInstance.create(":memory:");
  const c = await db.connect();
  const start = performance.now();
  const rows = (await c.runAndReadAll(`select sum(list_sum(loss_mask))::BIGINT from ${from}`)).getRows();
  const seconds = (performance.now() - start) / 1000;
  c.closeSync();
  db.closeSync();
  return { seconds, trained: Number(rows[0]![0]) };
}

const dir = mkdtempSync(join(tmpdir(), "rlgate-bench-export-"));
try {
  const dataDir = join(dir, "store");
  const store = new Store({ path: dataDir });
  for (let r = 0; r < ROLLOUTS; r++) await rollout(store, `r${r}`);
  await store.close();
  const tokens = ROLLOUTS * (1500 + TURNS * 940 - 640);
  console.log(`${ROLLOUTS} rollouts × ${TURNS} turns: ${ROLLOUTS} trajectories, ${tokens} tokens\n`);

  const runs = [
    { name: "jsonl", file: "x.jsonl", extra: [], read: (f: string) => `read_json('${f}', format='newline_delimited')` },
    { name: "parquet", file: "x.parquet", extra: [], read: (f: string) => `'${f}'` },
    {
      name: "parquet, one row group",
      file: "one.parquet",
      extra: ["--row-group-tokens", "1000000000"],
      read: (f: string) => `'${f}'`,
    },
  ];
  const results = [];
  for (const run of runs) {
    const out = join(dir, run.file);
    const { seconds, rssMb } = exportRun(dataDir, out, run.extra);
    const bytes = statSync(out).size;
    const read = await duckdbSeconds(run.read(out));
    results.push({ ...run, seconds, rssMb, bytes, read });
  }
  const base = results[0]!;
  const pad = (s: string | number, n: number) => String(s).padStart(n);
  console.log(
    `${"format".padEnd(24)}${pad("export s", 10)}${pad("MB", 9)}${pad("× jsonl", 9)}${pad("peak RSS MB", 13)}` +
      `${pad("duckdb sum s", 14)}${pad("trained", 10)}`,
  );
  for (const r of results) {
    console.log(
      `${r.name.padEnd(24)}${pad(r.seconds.toFixed(2), 10)}${pad((r.bytes / 1e6).toFixed(1), 9)}` +
        `${pad((r.bytes / base.bytes).toFixed(3), 9)}${pad(r.rssMb.toFixed(0), 13)}` +
        `${pad(r.read.seconds.toFixed(3), 14)}${pad(r.read.trained, 10)}`,
    );
  }
  console.log(
    `\nMtokens/s exported: jsonl ${(tokens / base.seconds / 1e6).toFixed(2)}, parquet ${(tokens / results[1]!.seconds / 1e6).toFixed(2)}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
