// npm run test:kill-runs -- --runs 500: fresh-store kill runs of `rlgate serve` under its default --workers
// (RLGATE_WORKERS or the machine's cores), each a new store, 8–16 clients, 100–600 ms of load after the first
// completed calls, then SIGKILL of a worker, the primary or the whole group in turn, a restart, and everything
// acknowledged read back (test/reliability/kill-run.ts). Prints a line a run and the counts; exits 1 when any call or
// finish was lost, refused or answered with a 5xx, or the gateway logged a fault.
//   --runs N (20)   --seed S (the run's random choices; default: time)   --workers N (passed to serve)
import { parseArgs } from "node:util";
import { startSim } from "../sim/index.ts";
import { killRun, type KillRunResult, type KillTarget } from "../test/reliability/kill-run.ts";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "20" },
    seed: { type: "string" },
    workers: { type: "string" },
  },
});
const runs = Number(values.runs);
let seed = Number(values.seed ?? Date.now() % 2 ** 31);
/** A small seeded generator (mulberry32): a run's choices can be made again with its seed. */
const random = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const TARGETS: KillTarget[] = ["worker", "primary", "group"];
console.log(`kill runs: ${runs}, seed ${seed}`);

const sim = await startSim({ port: 0, interTokenMs: 1 });
const totals = {
  runs: 0,
  byTarget: { worker: 0, primary: 0, group: 0 } as Record<KillTarget, number>,
  calls: 0,
  finishes: 0,
  missing: 0,
  broken: 0,
  lostFinishes: 0,
  unlisted: 0,
  refused: 0,
  serverErrors: 0,
  logProblems: 0,
  failedRuns: 0,
};
const started = Date.now();
const problems = (r: KillRunResult) =>
  r.lostCalls.length +
  r.brokenCalls.length +
  r.lostFinishes.length +
  r.unlisted.length +
  r.refused.length +
  r.serverErrors.length +
  r.logProblems.length;
try {
  for (let i = 1; i <= runs; i++) {
    const target = TARGETS[(i - 1) % TARGETS.length]!;
    const clients = 8 + Math.floor(random() * 9);
    const loadMs = 100 + Math.floor(random() * 500);
    let result: KillRunResult;
    try {
      result = await killRun({
        upstream: sim.url,
        target,
        clients,
        loadMs,
        ...(values.workers ? { serveArgs: ["--workers", values.workers] } : {}),
      });
    } catch (error) {
      // The run's machinery failed (a gateway that never started, a wait given up): counted, never a pass.
      totals.failedRuns++;
      console.log(`run ${i}/${runs} ${target}: failed: ${(error as Error).message.split("\n")[0]}`);
      continue;
    }
    totals.runs++;
    totals.byTarget[result.target]++;
    totals.calls += result.calls;
    totals.finishes += result.finishes;
    totals.missing += result.lostCalls.length;
    totals.broken += result.brokenCalls.length;
    totals.lostFinishes += result.lostFinishes.length;
    totals.unlisted += result.unlisted.length;
    totals.refused += result.refused.length;
    totals.serverErrors += result.serverErrors.length;
    totals.logProblems += result.logProblems.length;
    console.log(
      `run ${i}/${runs} ${result.target} (${result.workers} workers, ${clients} clients, ${loadMs} ms): ` +
        `${result.calls} calls, ${result.finishes} finishes acknowledged; ` +
        (problems(result) === 0 ? "all read back" : `PROBLEMS, store kept at ${result.dataDir}`),
    );
    for (const line of [
      ...result.lostCalls.map((seq) => `  missing call ${seq}`),
      ...result.brokenCalls.map((seq) => `  call ${seq} without its tokens`),
      ...result.lostFinishes.map((id) => `  finish of ${id} lost`),
      ...result.unlisted.map((why) => `  unlisted: ${why}`),
      ...result.refused.map((why) => `  refused: ${why}`),
      ...result.serverErrors.map((why) => `  5xx: ${why}`),
      ...result.logProblems.map((line) => `  log: ${line}`),
    ])
      console.log(line);
  }
} finally {
  await sim.close();
}
console.log(
  `\n${totals.runs} runs (${totals.byTarget.worker} worker, ${totals.byTarget.primary} primary, ` +
    `${totals.byTarget.group} group kills; ${totals.failedRuns} runs whose machinery failed) in ` +
    `${Math.round((Date.now() - started) / 1000)} s: ${totals.calls} calls and ${totals.finishes} finishes ` +
    `acknowledged; missing ${totals.missing}, without tokens ${totals.broken}, finishes lost ${totals.lostFinishes}, ` +
    `rollouts unlisted ${totals.unlisted}, refused ${totals.refused}, other 5xx ${totals.serverErrors}, ` +
    `fault lines logged ${totals.logProblems}`,
);
const bad =
  totals.failedRuns +
  totals.missing +
  totals.broken +
  totals.lostFinishes +
  totals.unlisted +
  totals.refused +
  totals.serverErrors +
  totals.logProblems;
process.exit(bad === 0 ? 0 : 1);
