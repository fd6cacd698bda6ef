// The closed loop on one machine: a gateway whose upstream is the PyTorch trainer's own policy endpoint, an RL core
// (GRPO), the trainer (clients/python/rlgate_client/torch_trainer.py: trains on the core's batches and hands the new
// weights each step to its policy server, a child process of its own that samples with them) and the one-tool harness
// (examples/closed-loop/harness.py) that drives rollouts through the gateway. Prints reward per step and the
// training–inference Pearson r.
//
//   npm run closed-loop -- [--steps 40] [--n 8] [--targets 2718,3141] [--seed 0] [--layout rows|tree] [--concurrency 4] [--trainer-args="--lr 0.01"] [--harness-args="--temperature 0.7"]
//   npm run closed-loop -- --async [--lag 1] [--update-mode abort|wait|keep]   rollouts keep running while the trainer
//                                   trains; each update pauses and resumes the gateway through the core's gRPC
//                                   PausePolicy / ResumePolicy (docs/trainers.md)
//   npm run closed-loop -- --compare   the synchronous loop, then the asynchronous one: wall times side by side
//
// runClosedLoop is what test/e2e/closed-loop.test.ts runs (smaller). Debian's python3-torch, python3-grpcio,
// python3-grpc-tools and python3-numpy under /usr/bin/python3 (or RLGATE_PYTHON).
import { DEFAULT_PYTHON } from "../cli/default-python.ts";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { freePort } from "../util/listen.ts";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { startGateway, type Gateway } from "../gateway/index.ts";
import { startCore, type Core } from "../rl-core/core/index.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

export interface ClosedLoopOptions {
  /** Training steps (each: len(targets) × n rollouts, two model calls each). */
  steps: number;
  /** Rollouts per task and step: the GRPO group. Default 8. */
  n?: number;
  /** Task t answers targets[t]. Default ["2718", "3141"]. */
  targets?: readonly string[];
  seed?: number;
  /** Default: RLGATE_PYTHON or /usr/bin/python3. */
  python?: string;
  /** Stores of gateway and core (default: a temporary folder, removed afterwards). */
  dataDir?: string;
  /** Extra arguments of the trainer (e.g. ["--lr", "0.003"]). */
  trainerArgs?: readonly string[];
  /** Extra arguments of the harness (e.g. ["--temperature", "0.7"]). */
  harnessArgs?: readonly string[];
  /** Gives up (and stops every process) after this long. Default 15 min. */
  timeoutMs?: number;
  /** The layout the core serves batches in (the trainer takes the core's): rows (default) or tree. */
  layout?: "rows" | "tree";
  /**
   * Asynchronous: rollouts keep running while the trainer trains; the trainer's updates pause the gateway, swap the
   * served weights and resume it with the new version (the gateway continues interrupted answers and records each
   * token's version). Default false: each step sampled by the version trained on the steps before.
   */
  async?: boolean;
  /** With async: a step's rollouts start once the served version is at least step − lag. Default 1. */
  lag?: number;
  /** With async: how the gateway pauses running answers for an update. Default abort. */
  updateMode?: "abort" | "wait" | "keep";
  /** Rollouts the harness runs at once. Default 4. */
  concurrency?: number;
  /** Every line the trainer and the harness print, as they print it. */
  onLine?: (source: "trainer" | "harness", line: string) => void;
}

export interface StepFigure {
  step: number;
  /** The policy versions that sampled the step's trained tokens (each token's, as the batches carry them). */
  sampledBy: string[];
  /** Current version − each trained token's version: mean and max over the step's trained tokens. */
  stalenessMean: number;
  stalenessMax: number;
  /** Trained tokens sampled by an older version than the step trains from, and those without a version. */
  staleTokens: number;
  unversionedTokens: number;
  /**
   * |sampling logprob − the logprob under the weights the step starts from|: the largest on tokens their versions
   * call fresh (float rounding when versions are exact), the mean on stale ones.
   */
  freshMaxAbsDlogp: number;
  staleMeanAbsDlogp: number;
  /** The trainer's time on the step's gradient steps, on its weight update (with async: pause, swap, resume), and waiting for batches. */
  trainMs: number;
  updateMs: number;
  waitedMs: number;
  reward: number;
  rewardByTarget: Record<string, number>;
  /** Rollouts whose final answer was the whole target. */
  exact: number;
  rollouts: number;
  /** Rows (trajectories) the step's batches held: one per rollout when each second turn continued its first. */
  rows: number;
  /** The layout the trainer got, the tokens its forward passes took, and those the same rows hold. */
  layout: string;
  tokens: number;
  rowTokens: number;
  /** Training–inference agreement on the step's trained tokens, before the step's update (the core's figures). */
  pearson: number;
  k3Kl: number;
  absDiffP99: number;
  loss: number[];
}

export interface ClosedLoopResult {
  mode: "sync" | "async";
  steps: StepFigure[];
  parameters: number;
  seconds: number;
  /** Harness calls, and answers that reached the harness ended by an abort (0: every interrupted one continued). */
  calls: number;
  abortsSeen: number;
  /** The gateway's weight-update figures (its /metrics): pauses, answers continued after one, calls held by one. */
  pauses: number;
  continued: number;
  heldCalls: number;
  /** The machine's 1-minute load average when the first rollout started and when the last update was done. */
  load: [number, number];
}

/** Whether `python` imports what the trainer needs; the reason when it does not. */
export function torchTrainerMissing(python: string): string | null {
  const probe = spawnSync(python, ["-c", "import torch, grpc, grpc_tools, numpy"], { encoding: "utf8" });
  if (probe.error) return `${python}: ${probe.error.message}`;
  if (probe.status === 0) return null;
  const last = probe.stderr.trim().split("\n").pop() ?? "";
  return `${python} cannot import torch, grpc, grpc_tools and numpy (${last}): install Debian's python3-torch python3-grpcio python3-grpc-tools python3-numpy`;
}

interface Child {
  process: ChildProcess;
  records: Array<Record<string, unknown>>;
  stderr: string[];
  exited: Promise<number | null>;
}

function startPython(
  python: string,
  args: string[],
  source: "trainer" | "harness",
  onLine: ClosedLoopOptions["onLine"],
  onRecord?: (record: Record<string, unknown>) => void,
): Child {
  const child = spawn(python, args, {
    cwd: ROOT,
    env: { ...process.env, PYTHONPATH: join(ROOT, "clients", "python"), PYTHONUNBUFFERED: "1" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const records: Array<Record<string, unknown>> = [];
  const stderr: string[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    onLine?.(source, line);
    try {
      const record = JSON.parse(line) as Record<string, unknown>;
      records.push(record);
      onRecord?.(record);
    } catch {
      // not a record: shown through onLine only
    }
  });
  createInterface({ input: child.stderr! }).on("line", (line) => {
    onLine?.(source, line);
    stderr.push(line);
    if (stderr.length > 40) stderr.shift();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { process: child, records, stderr, exited };
}

function stop(child: Child | null): void {
  const pid = child?.process.pid;
  if (pid === undefined || child!.process.exitCode !== null || child!.process.signalCode !== null) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    child!.process.kill("SIGKILL");
  }
}

/** The gateway's weight-update counters, from its Prometheus text (0 where a counter has no sample yet). */
function policyUpdateFigures(metrics: string): Pick<ClosedLoopResult, "pauses" | "continued" | "heldCalls"> {
  const total = (name: string) =>
    metrics
      .split("\n")
      .filter((line) => line.startsWith(name) && !line.startsWith(`${name}_`))
      .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0);
  return {
    pauses: total("rlgate_policy_pauses_total"),
    continued: total("rlgate_policy_continued_answers_total"),
    heldCalls: total("rlgate_policy_held_calls_total"),
  };
}

function failure(what: string, child: Child, code: number | null): Error {
  return new Error(`${what} exited with ${code}:\n${child.stderr.join("\n")}`);
}

export async function runClosedLoop(options: ClosedLoopOptions): Promise<ClosedLoopResult> {
  const python = options.python ?? DEFAULT_PYTHON;
  const n = options.n ?? 8;
  const targets = options.targets ?? ["2718", "3141"];
  const seed = options.seed ?? 0;
  const asynchronous = options.async ?? false;
  const missing = torchTrainerMissing(python);
  if (missing) throw new Error(missing);
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "rlgate-closed-loop-"));
  let gateway: Gateway | null = null;
  let core: Core | null = null;
  let trainer: Child | null = null;
  let harness: Child | null = null;
  let timer: NodeJS.Timeout | undefined;
  try {
    const policyPort = await freePort();
    const policyUrl = `http://127.0.0.1:${policyPort}`;
    gateway = await startGateway({ upstream: policyUrl, port: 0, grpcPort: 0, dataDir: join(dataDir, "gateway") });
    core = await startCore({
      gateways: [gateway.grpc!.address],
      // The trainer's weight updates (PausePolicy / ResumePolicy) reach the gateway through its control API.
      gatewayApis: [gateway.url],
      port: 0,
      metricsPort: null,
      dataDir: join(dataDir, "core"),
      estimator: "grpo",
      // Every group its own batch, served at once: a step is a whole number of groups in either mode, and no step
      // waits for a batch timeout.
      batchUnit: "group",
      tokenBudget: 1,
      batchTimeoutMs: 300,
      // A constant N: every trained token weighs 1/N whatever batch it lands in.
      lossTokens: 1024,
      layout: options.layout ?? "rows",
    });
    let serving: () => void = () => {};
    const ready = new Promise<void>((resolve) => (serving = resolve));
    const rollouts = targets.length * n;
    trainer = startPython(
      python,
      [
        "-m",
        "rlgate_client.torch_trainer",
        "--core",
        core.address,
        "--serve",
        `127.0.0.1:${policyPort}`,
        "--rollouts-per-step",
        String(rollouts),
        "--steps",
        String(options.steps),
        "--seed",
        String(seed),
        "--json",
        ...(asynchronous ? ["--async", "--update-mode", options.updateMode ?? "abort"] : []),
        ...(options.trainerArgs ?? []),
      ],
      "trainer",
      options.onLine,
      (record) => record["event"] === "serving" && serving(),
    );
    const timeoutMs = options.timeoutMs ?? 15 * 60_000;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the closed loop did not finish within ${timeoutMs / 1000} s`)),
        timeoutMs,
      );
    });
    const trainerDied = trainer.exited.then((code) => {
      throw failure("the trainer", trainer!, code);
    });
    trainerDied.catch(() => {});
    await Promise.race([ready, trainerDied, timedOut]);
    // The loop's wall time: from the first rollout to the last update (the processes' start-up is not part of it).
    const started = Date.now();
    const loadAtStart = loadavg()[0]!;
    harness = startPython(
      python,
      [
        "examples/closed-loop/harness.py",
        "--gateway",
        gateway.url,
        "--policy",
        policyUrl,
        "--steps",
        String(options.steps),
        "--n",
        String(n),
        "--targets",
        targets.join(","),
        "--seed",
        String(seed),
        "--run-id",
        `seed${seed}`,
        "--concurrency",
        String(options.concurrency ?? 4),
        ...(asynchronous ? ["--async", "--lag", String(options.lag ?? 1)] : []),
        ...(options.harnessArgs ?? []),
      ],
      "harness",
      options.onLine,
    );
    const harnessCode = await Promise.race([harness.exited, trainerDied, timedOut]);
    if (harnessCode !== 0) throw failure("the harness", harness, harnessCode);
    const trainerCode = await Promise.race([trainer.exited, timedOut]);
    if (trainerCode !== 0) throw failure("the trainer", trainer, trainerCode);

    const seconds = (Date.now() - started) / 1000;
    const load: [number, number] = [loadAtStart, loadavg()[0]!];

    const updates = policyUpdateFigures(await (await fetch(`${gateway.url}/metrics`)).text());
    const done = harness.records.find((r) => r["event"] === "done");
    if (!done) throw new Error("the harness ended without its done line");
    const steps = trainer.records
      .filter((r) => r["event"] === "step")
      .map((t): StepFigure => {
        const byTask = t["reward_by_task"] as Record<string, number>;
        return {
          step: t["step"] as number,
          sampledBy: t["sampled_by"] as string[],
          stalenessMean: t["staleness_mean"] as number,
          stalenessMax: t["staleness_max"] as number,
          staleTokens: t["stale_tokens"] as number,
          unversionedTokens: t["unversioned_tokens"] as number,
          freshMaxAbsDlogp: t["fresh_max_abs_dlogp"] as number,
          staleMeanAbsDlogp: t["stale_mean_abs_dlogp"] as number,
          trainMs: t["step_ms"] as number,
          updateMs: t["update_ms"] as number,
          waitedMs: t["waited_ms"] as number,
          reward: t["reward_mean"] as number,
          // The harness names task t "t{t}": its target is targets[t].
          rewardByTarget: Object.fromEntries(
            Object.entries(byTask).map(([task, r]) => [targets[Number(task.slice(1))] ?? task, r]),
          ),
          exact: t["exact"] as number,
          rollouts: t["rollouts"] as number,
          rows: t["rows"] as number,
          layout: t["layout"] as string,
          tokens: t["tokens"] as number,
          rowTokens: t["row_tokens"] as number,
          pearson: t["pearson"] as number,
          k3Kl: t["k3_kl"] as number,
          absDiffP99: t["abs_diff_p99"] as number,
          loss: t["loss"] as number[],
        };
      });
    const servingRecord = trainer.records.find((r) => r["event"] === "serving")!;
    return {
      mode: asynchronous ? "async" : "sync",
      steps,
      parameters: servingRecord["parameters"] as number,
      seconds,
      calls: done["calls"] as number,
      abortsSeen: done["aborts_seen"] as number,
      ...updates,
      load,
    };
  } finally {
    clearTimeout(timer);
    stop(harness);
    stop(trainer);
    await core?.close();
    await gateway?.close();
    if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);

/** The first and the last `window` steps' mean reward. */
export function rewardWindows(result: ClosedLoopResult, window: number): { first: number; last: number } {
  const w = Math.min(window, Math.floor(result.steps.length / 2));
  return {
    first: mean(result.steps.slice(0, w).map((s) => s.reward)),
    last: mean(result.steps.slice(-w).map((s) => s.reward)),
  };
}

/** The figure: one line per step, then the first and last steps' mean reward. */
export function formatFigure(result: ClosedLoopResult, window = 5): string {
  const lines = [
    `${result.mode}: step  policy  stale mean/max  reward  exact    pearson r  k3 KL     p99 |dlogp|  reward by target`,
    ...result.steps.map(
      (s) =>
        `${String(s.step).padStart(result.mode.length + 6)}  ${s.sampledBy.join(",").padEnd(8)}` +
        `${`${s.stalenessMean.toFixed(2)}/${s.stalenessMax}`.padEnd(16)}${s.reward.toFixed(3).padEnd(8)}` +
        `${`${s.exact}/${s.rollouts}`.padEnd(9)}${s.pearson.toFixed(6).padEnd(11)}${s.k3Kl.toExponential(1).padEnd(10)}` +
        `${s.absDiffP99.toExponential(1).padEnd(13)}${Object.entries(s.rewardByTarget)
          .map(([t, r]) => `${t} ${r.toFixed(2)}`)
          .join("  ")}`,
    ),
  ];
  const w = Math.min(window, Math.floor(result.steps.length / 2));
  const { first, last } = rewardWindows(result, window);
  const trained = result.steps.reduce((a, s) => a + s.staleTokens, 0);
  lines.push(
    `mean reward: first ${w} steps ${first.toFixed(3)}, last ${w} steps ${last.toFixed(3)}; ` +
      `pearson r at step 0 ${result.steps[0]?.pearson.toFixed(6)}, lowest ${Math.min(...result.steps.map((s) => s.pearson)).toFixed(6)}; ` +
      `${result.parameters} parameters, ${result.steps.length} steps in ${result.seconds.toFixed(1)} s; ` +
      `layout ${result.steps[0]?.layout}, forward tokens ${result.steps.reduce((a, s) => a + s.tokens, 0)} ` +
      `(rows hold ${result.steps.reduce((a, s) => a + s.rowTokens, 0)})`,
    `staleness over trained tokens: mean ${mean(result.steps.map((s) => s.stalenessMean)).toFixed(2)} (per step), ` +
      `max ${Math.max(...result.steps.map((s) => s.stalenessMax))}; ${trained} stale tokens, ` +
      `${result.steps.reduce((a, s) => a + s.unversionedTokens, 0)} without a version; |dlogp| fresh tokens max ` +
      `${Math.max(...result.steps.map((s) => s.freshMaxAbsDlogp)).toExponential(1)}, stale tokens mean ` +
      `${mean(result.steps.filter((s) => s.staleTokens > 0).map((s) => s.staleMeanAbsDlogp)).toExponential(1)}; ` +
      `${result.calls} calls, ${result.pauses} updates paused the gateway, ${result.continued} answers continued, ` +
      `${result.heldCalls} calls held, ${result.abortsSeen} aborts reached the harness; trainer waited ` +
      `${(result.steps.reduce((a, s) => a + s.waitedMs, 0) / 1000).toFixed(1)} s for batches; load average ` +
      `${result.load[0].toFixed(1)} → ${result.load[1].toFixed(1)}`,
  );
  return lines.join("\n");
}

/** The synchronous and asynchronous runs side by side: wall time, the trainer's wait for batches, reward, staleness,
 * calls, updates that paused the gateway, aborts that reached the harness, trained tokens without a version. */
export function formatComparison(sync: ClosedLoopResult, async: ClosedLoopResult, window = 5): string {
  const line = (r: ClosedLoopResult) => {
    const { first, last } = rewardWindows(r, window);
    const waited = r.steps.reduce((a, s) => a + s.waitedMs, 0) / 1000;
    return (
      `${r.mode.padEnd(6)}${`${r.seconds.toFixed(1)} s`.padEnd(10)}${(r.seconds / r.steps.length).toFixed(2).padEnd(9)}` +
      `${`${waited.toFixed(1)} s`.padEnd(9)}${first.toFixed(3)} → ${last.toFixed(3)}      ` +
      `${`${mean(r.steps.map((s) => s.stalenessMean)).toFixed(2)}/${Math.max(...r.steps.map((s) => s.stalenessMax))}`.padEnd(20)}` +
      `${String(r.calls).padEnd(7)}${String(r.pauses).padEnd(8)}${String(r.abortsSeen).padEnd(7)}` +
      `${String(r.steps.reduce((a, s) => a + s.unversionedTokens, 0)).padEnd(13)}` +
      `${r.load[0].toFixed(1)} → ${r.load[1].toFixed(1)}`
    );
  };
  const w = Math.min(window, Math.floor(sync.steps.length / 2));
  return [
    `mode  wall      s/step   waited   reward (first ${w} → last ${w})  staleness mean/max  calls  pauses  aborts  unversioned  load`,
    line(sync),
    line(async),
    `async/sync wall time ${(async.seconds / sync.seconds).toFixed(2)} (${(sync.seconds / async.seconds).toFixed(2)}× faster)`,
  ].join("\n");
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      steps: { type: "string", default: "40" },
      n: { type: "string", default: "8" },
      targets: { type: "string", default: "2718,3141" },
      seed: { type: "string", default: "0" },
      python: { type: "string" },
      "trainer-args": { type: "string", default: "" },
      "harness-args": { type: "string", default: "" },
      layout: { type: "string", default: "rows" },
      async: { type: "boolean", default: false },
      compare: { type: "boolean", default: false },
      lag: { type: "string", default: "1" },
      "update-mode": { type: "string", default: "abort" },
      concurrency: { type: "string", default: "4" },
      verbose: { type: "boolean", default: false },
    },
  });
  if (values.layout !== "rows" && values.layout !== "tree")
    throw new Error(`--layout must be rows or tree, not '${values.layout}'`);
  const updateMode = values["update-mode"];
  if (updateMode !== "abort" && updateMode !== "wait" && updateMode !== "keep")
    throw new Error(`--update-mode must be abort, wait or keep, not '${updateMode}'`);
  const run = (asynchronous: boolean) =>
    runClosedLoop({
      steps: Number(values.steps),
      n: Number(values.n),
      targets: values.targets.split(","),
      seed: Number(values.seed),
      python: values.python,
      trainerArgs: values["trainer-args"].split(" ").filter(Boolean),
      harnessArgs: values["harness-args"].split(" ").filter(Boolean),
      layout: values.layout as "rows" | "tree",
      async: asynchronous,
      lag: Number(values.lag),
      updateMode,
      concurrency: Number(values.concurrency),
      onLine: (source, line) => {
        if (values.verbose || !line.startsWith("{")) process.stderr.write(`[${source}] ${line}\n`);
      },
    });
  if (!values.compare) {
    console.log(formatFigure(await run(values.async)));
    return;
  }
  const sync = await run(false);
  console.log(formatFigure(sync));
  const async = await run(true);
  console.log(formatFigure(async));
  console.log(formatComparison(sync, async));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
