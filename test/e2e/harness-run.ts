// What the end-to-end tests of real harness CLIs share: a clean environment in a temp dir (nothing of the user's
// keys, proxies or config leaks in), a bounded run of the CLI in its own process group (killed whole on timeout),
// and the reconstruction of the rollout it made. Used by the tests and by `npm run harness-matrix`.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { CallRecord } from "../../store/records.ts";
import { fromSnakeCase } from "../../util/json-case.ts";
import { killGroup } from "./process-group.ts";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const BIN = join(ROOT, "node_modules", ".bin");

export interface HarnessDirs {
  dir: string;
  workspace: string;
  home: string;
  tmp: string;
}

export function harnessDirs(prefix: string): HarnessDirs {
  const dir = mkdtempSync(join(tmpdir(), `rlgate-${prefix}-`));
  const dirs = { dir, workspace: join(dir, "workspace"), home: join(dir, "home"), tmp: join(dir, "tmp") };
  for (const d of [dirs.workspace, dirs.home, dirs.tmp]) mkdirSync(d, { recursive: true });
  return dirs;
}

/** The environment every harness run starts from: PATH, an isolated HOME and TMPDIR, no colours. */
export function baseEnv(dirs: HarnessDirs, extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: dirs.home,
    TMPDIR: dirs.tmp,
    TERM: "dumb",
    NO_COLOR: "1",
    ...extra,
  };
}

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  ms: number;
  stdout: string;
  stderr: string;
}

/** Live runs, so a test's `after` (or a signal) can kill what is left. */
export const liveRuns = new Set<ChildProcess>();

export function killLiveRuns(): void {
  for (const child of liveRuns) killGroup(child);
}

/** Runs a CLI detached (its own process group, stdin closed) and kills the group when it overruns `timeoutMs`. */
export function runCli(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<CliRun> {
  const started = Date.now();
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  liveRuns.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child);
  }, options.timeoutMs);
  return new Promise((resolve) => {
    child.on("error", (err) => (stderr += `\nspawn error: ${err.message}`));
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      liveRuns.delete(child);
      resolve({ code, signal, timedOut, ms: Date.now() - started, stdout, stderr });
    });
  });
}

export interface Reconstruction {
  trajectories: { segment: string; trained: boolean; lossMask: number[]; reward: number | null }[];
  segments: unknown[];
  breaks: { kind: string; cause?: string }[];
  stats: {
    calls: number;
    breaks: Record<string, number>;
    sampledTokens: number;
    trainedTokens: number;
    amplification: number;
    retainedTrajectories: number;
  };
  flags: { flagged: boolean; reasons: string[] };
}

/** Finishes the rollout with `reward` and reads its trajectories. */
export async function finishAndReconstruct(gatewayUrl: string, rolloutId: string, reward = 1): Promise<Reconstruction> {
  const finish = await fetch(`${gatewayUrl}/api/rollouts/${rolloutId}/finish`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ reward }),
  });
  if (finish.status !== 200) throw new Error(`finish: ${finish.status} ${await finish.text()}`);
  const res = await fetch(`${gatewayUrl}/api/rollouts/${rolloutId}/trajectories`);
  if (res.status !== 200) throw new Error(`trajectories: ${res.status} ${await res.text()}`);
  return fromSnakeCase<Reconstruction>(await res.json());
}

/** One line per captured call, for failure messages. */
export function describeCalls(calls: readonly CallRecord[]): string {
  return calls
    .map(
      (c) =>
        `#${c.seq} ${c.api} ${c.status} ${c.tokenSource} http=${c.httpStatus} ${c.error ?? ""}${c.warnings ? ` warnings=${c.warnings.length}` : ""}`,
    )
    .join("\n");
}

/** What a failed assertion shows of a run. */
export function describeRun(
  name: string,
  run: CliRun | undefined,
  calls: readonly CallRecord[] | undefined,
  more = "",
): string {
  const tail = (s: string, n: number) => (s.length > n ? `…${s.slice(-n)}` : s);
  return [
    `${name} exit=${run?.code} signal=${run?.signal} timedOut=${run?.timedOut} after ${run?.ms} ms`,
    `--- stdout ---\n${tail(run?.stdout ?? "", 3000)}`,
    `--- stderr ---\n${tail(run?.stderr ?? "", 3000)}`,
    `--- calls (${calls?.length}) ---\n${describeCalls(calls ?? [])}`,
    more,
  ].join("\n");
}
