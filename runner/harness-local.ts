// A harness run outside a sandbox (the e2e tests, `npm run harness-matrix`, `rlgate harness-check`): temp folders for
// its workspace, HOME and TMPDIR, its launch written into them with a clean environment (nothing of the user's keys,
// proxies or config leaks in), and a bounded run of its CLI in a process group of its own, killed whole on timeout
// (CLIs relaunch themselves and spawn their tools' shells; killing the launcher alone leaves them running).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { commonEnv, type Harness, type LaunchOptions } from "./harnesses.ts";

/** rlgate's node_modules/.bin: the harness CLIs it installs as devDependencies. */
export const NODE_BIN = fileURLToPath(new URL("../node_modules/.bin", import.meta.url));

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

/** The environment every local run starts from: PATH (rlgate's CLIs first), an isolated HOME and TMPDIR, no colours. */
export function baseEnv(dirs: HarnessDirs, extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: `${NODE_BIN}:${process.env["PATH"] ?? "/usr/bin:/bin"}`,
    HOME: dirs.home,
    TMPDIR: dirs.tmp,
    TERM: "dumb",
    NO_COLOR: "1",
    ...extra,
  };
}

export interface Launch {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
}

export interface LocalLaunch {
  dirs: HarnessDirs;
  /** The gateway's origin, e.g. http://127.0.0.1:8700. */
  origin: string;
  rolloutId: string;
  model: string;
  prompt: string;
  options?: LaunchOptions;
}

/** Writes the harness's files under `dirs.home` and returns how to run it in `dirs.workspace`. */
export function launchInDirs(h: Harness, l: LocalLaunch): Launch {
  const ctx = {
    prompt: l.prompt,
    origin: l.origin,
    rolloutId: l.rolloutId,
    model: l.model,
    home: l.dirs.home,
    workspace: l.dirs.workspace,
  };
  const launch = h.launch(ctx, l.options);
  for (const [rel, content] of Object.entries(launch.files)) {
    const path = join(l.dirs.home, rel);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
  }
  const [command, ...args] = launch.argv;
  return { command: command!, args, env: baseEnv(l.dirs, { ...commonEnv(ctx), ...launch.env }) };
}

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  ms: number;
  stdout: string;
  stderr: string;
}

export function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    child.kill("SIGKILL");
  }
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
