// One fresh-store kill run: `rlgate serve` under its default --workers (RLGATE_WORKERS or the machine's cores) on a new
// store, a few hundred ms of load from 8–16 clients, then SIGKILL of one worker, of the primary or of the whole group,
// a restart where the gateway is gone, and everything acknowledged read back. Fresh stores are where the fault of
// docs/deploy.md ("Gateway workers") was seen: the first rollouts, within the store's first second.
import { rmSync } from "node:fs";
import { spawnCli, tempDir, until, type CliProcess } from "../helpers.ts";
import { client, newAcknowledged, verify } from "./load.ts";

export type KillTarget = "worker" | "primary" | "group";

export interface KillRunOptions {
  upstream: string;
  target: KillTarget;
  clients: number;
  /** Load after the first completed calls, before the kill. */
  loadMs: number;
  /** Passed to `serve` as they are (e.g. ["--workers", "2"]); none: serve's defaults. */
  serveArgs?: string[];
}

export interface KillRunResult {
  target: KillTarget;
  /** Gateway processes serving calls (1: no cluster). */
  workers: number;
  calls: number;
  finishes: number;
  lostCalls: number[];
  brokenCalls: number[];
  lostFinishes: string[];
  unlisted: string[];
  /** Calls the gateway refused because a call they refer to is not in the store (5xx answers and log lines). */
  refused: string[];
  /** Other 5xx answers. */
  serverErrors: string[];
  /** Lines of the gateway's output that name a fault: unhandled rejections, internal errors, signals but SIGKILL. */
  logProblems: string[];
  /** The store, kept when anything above is not empty. */
  dataDir: string | null;
}

interface Served {
  proc: CliProcess;
  url: string;
  /** Worker pids; empty for a single-process gateway. */
  pids: number[];
}

async function serve(upstream: string, dataDir: string, extra: string[]): Promise<Served> {
  const proc = spawnCli([
    "serve",
    "--upstream",
    upstream,
    "--port",
    "0",
    "--grpc-port",
    "0",
    "--data",
    dataDir,
    ...extra,
  ]);
  try {
    await proc.waitFor(/trajectories:\s+grpc:\/\/\S+/, 180_000); // the banner's last line; a loaded machine is slow
  } catch (error) {
    await proc.kill();
    throw error;
  }
  const out = proc.output();
  const pids =
    out
      .match(/workers:\s+\d+ \(pids ([\d, ]+)\)/)?.[1]
      ?.split(", ")
      .map(Number) ?? [];
  return { proc, url: out.match(/listening on (http:\/\/\S+)/)![1]!, pids };
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const REFUSED = /was not recorded: it refers to call/;
const LOG_PROBLEM = /unhandled|uncaught|internal error|not recorded|SIGBUS|SIGSEGV|SIGABRT|out of memory|MDB_/i;

export async function killRun(options: KillRunOptions): Promise<KillRunResult> {
  const dataDir = tempDir("kill-run");
  const extra = options.serveArgs ?? [];
  const ack = newAcknowledged();
  const outputs: string[] = [];
  let gateway = await serve(options.upstream, dataDir, extra);
  const workers = Math.max(1, gateway.pids.length);
  let stop = false;
  const first = gateway;
  const clients = Array.from({ length: options.clients }, (_, i) =>
    client(
      () => gateway.url,
      i,
      ack,
      () => stop,
      3,
    ),
  );
  try {
    await until(() => (ack.calls.size >= 8 ? true : undefined), 120_000, "the first completed calls");
    await sleep(options.loadMs);
    // One process of a single-process gateway is the whole group.
    const target = options.target !== "group" && first.pids.length === 0 ? "group" : options.target;
    if (target === "worker") {
      const slot = Math.floor(Math.random() * first.pids.length);
      const pid = first.pids[slot]!;
      process.kill(pid, "SIGKILL");
      await first.proc.waitFor(new RegExp(`worker ${slot} \\(pid ${pid}\\) exited \\(SIGKILL\\); starting a new one`));
      await first.proc.waitFor(new RegExp(`gateway worker ${slot} \\(pid \\d+\\) listens again`), 180_000);
      const atRestart = ack.calls.size;
      await until(() => (ack.calls.size >= atRestart + 8 ? true : undefined), 120_000, "calls after the restart");
      stop = true;
      await Promise.all(clients);
    } else {
      const primary = first.proc.child.pid!;
      if (target === "group") for (const pid of [primary, ...first.pids]) process.kill(pid, "SIGKILL");
      else process.kill(primary, "SIGKILL");
      stop = true;
      await Promise.all(clients);
      await first.proc.kill("SIGKILL");
      // Workers whose primary is gone close themselves (cli/serve-workers.ts); the next gateway starts after them.
      await until(() => (first.pids.some(alive) ? undefined : true), 120_000, "the old workers' exit");
      outputs.push(first.proc.output());
      gateway = await serve(options.upstream, dataDir, extra);
    }
    const verified = await verify(gateway.url, ack);
    await gateway.proc.kill("SIGTERM");
    outputs.push(gateway.proc.output());
    const logLines = outputs.flatMap((text) => text.split("\n")).filter((line) => LOG_PROBLEM.test(line));
    const result: KillRunResult = {
      target,
      workers,
      calls: ack.calls.size,
      finishes: ack.finishes.size,
      lostCalls: verified.lostCalls,
      brokenCalls: verified.brokenCalls,
      lostFinishes: verified.lostFinishes,
      unlisted: verified.unlisted,
      refused: [...ack.serverErrors.filter((e) => REFUSED.test(e)), ...logLines.filter((line) => REFUSED.test(line))],
      serverErrors: ack.serverErrors.filter((e) => !REFUSED.test(e)),
      logProblems: logLines.filter((line) => !REFUSED.test(line)),
      dataDir,
    };
    const clean =
      result.lostCalls.length +
        result.brokenCalls.length +
        result.lostFinishes.length +
        result.unlisted.length +
        result.refused.length +
        result.serverErrors.length +
        result.logProblems.length ===
      0;
    if (clean) {
      rmSync(dataDir, { recursive: true, force: true });
      result.dataDir = null;
    }
    return result;
  } finally {
    stop = true;
    await Promise.all(clients);
    await first.proc.kill("SIGKILL");
    await gateway.proc.kill("SIGKILL");
  }
}
