// The clean-clone walk: every shell block of the given pages (default README.md), run verbatim and in order, as a
// newcomer would paste them, in a fresh copy of this working tree (its own store, a new HOME) that shares this
// checkout's node_modules. Blocks marked `<!-- walk: skip (why) -->` are left out (scripts/readme-walk/blocks.ts).
// It runs in a network namespace of its own where `unshare` allows (the pages' fixed ports, 8700 and on, then never
// meet another gateway on this machine). It fails on the first block that fails, and when the gateway counted a
// harness call that was not ok (an upstream error, a refusal): a block can exit 0 over a call that went wrong.
//
//   npx tsx scripts/readme-walk.ts [--timeout 300] [--keep] [PAGE…]
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { shellBlocks } from "./readme-walk/blocks.ts";
import { walkScript } from "./readme-walk/script.ts";
import { copyWorkingTree, ROOT } from "./working-tree-copy.ts";

/** Built or installed here, too big to copy, only read by the walk. */
const SHARED = ["node_modules", "native/build"];

/** `ip`, for bringing up loopback in a new network namespace; null when not found. */
function ipCommand(): string | null {
  for (const dir of [...(process.env["PATH"] ?? "").split(":"), "/usr/sbin", "/sbin"]) {
    if (dir && existsSync(join(dir, "ip"))) return join(dir, "ip");
  }
  return null;
}

/** The command that runs `script` with bash: in a network namespace of its own where this machine allows one. */
function isolated(script: string): { command: string; args: string[]; isolation: string } {
  const ip = ipCommand();
  const probe = spawnSync("unshare", ["--user", "--map-root-user", "--net", "true"], { stdio: "ignore" });
  if (ip && probe.status === 0) {
    return {
      command: "unshare",
      args: ["--user", "--map-root-user", "--net", "bash", "-c", `${ip} link set lo up && exec bash "$0"`, script],
      isolation: "a network namespace of its own",
    };
  }
  return { command: "bash", args: [script], isolation: "this machine's network (no user namespaces here)" };
}

/** Harness calls the gateway counted by status (rlgate_requests_total), from its /metrics text. */
function callsByStatus(metrics: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const match of metrics.matchAll(/^rlgate_requests_total\{([^}]*)\} (\S+)$/gm)) {
    const status = /status="([^"]*)"/.exec(match[1]!)?.[1] ?? "?";
    counts.set(status, (counts.get(status) ?? 0) + Number(match[2]));
  }
  return counts;
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: { timeout: { type: "string", default: "300" }, keep: { type: "boolean", default: false } },
    allowPositionals: true,
  });
  const pages = positionals.length > 0 ? positionals : ["README.md"];
  const blocks = pages.flatMap((page) => shellBlocks(page, readFileSync(join(ROOT, page), "utf8")));
  const work = mkdtempSync(join(tmpdir(), "rlgate-walk-"));
  const checkout = join(work, "rlgate");
  const logs = join(work, "logs");
  const home = join(work, "home");
  for (const dir of [checkout, logs, home]) mkdirSync(dir, { recursive: true });
  copyWorkingTree(checkout, SHARED);
  const script = join(work, "walk.sh");
  writeFileSync(script, walkScript(blocks));

  const run = isolated(script);
  const runnable = blocks.filter((b) => b.mode.kind !== "skip").length;
  console.error(
    `walk: ${runnable} of ${blocks.length} shell blocks of ${pages.join(", ")} in ${checkout}, on ${run.isolation}`,
  );
  // Its own process group: what the blocks leave running (the gateway, the core) is stopped with it at the end.
  const child = spawn(run.command, run.args, {
    cwd: checkout,
    detached: true,
    stdio: "inherit",
    env: {
      ...process.env,
      HOME: home,
      WALK_LOGS: logs,
      // A newcomer's PATH: this Node first, then the system's (its python3), then the rest.
      PATH: [dirname(process.execPath), "/usr/local/bin", "/usr/bin", "/bin", process.env["PATH"] ?? ""].join(":"),
    },
  });
  const stopGroup = (signal: NodeJS.Signals): void => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // already gone
    }
  };
  const timer = setTimeout(
    () => {
      console.error(`walk: timed out after ${values.timeout} s`);
      stopGroup("SIGKILL");
    },
    Number(values.timeout) * 1000,
  );
  const code = await new Promise<number>((resolve) => child.on("exit", (c, s) => resolve(c ?? (s ? 1 : 0))));
  clearTimeout(timer);
  stopGroup("SIGTERM");
  await new Promise((r) => setTimeout(r, 1000));
  stopGroup("SIGKILL");

  let failed = code !== 0;
  const metricsFile = join(logs, "metrics.txt");
  if (!failed && existsSync(metricsFile)) {
    const counts = callsByStatus(readFileSync(metricsFile, "utf8"));
    const summary = [...counts].map(([status, n]) => `${status} ${n}`).join(", ");
    const bad = [...counts].filter(([status, n]) => status !== "ok" && n > 0);
    console.error(`walk: harness calls the gateway counted: ${summary || "none"}`);
    if (bad.length > 0 || (counts.get("ok") ?? 0) === 0) {
      console.error("walk: a harness call was not ok (or none was made): see the blocks' output above");
      failed = true;
    }
  }
  if (failed || values.keep) console.error(`walk: its files are in ${work}`);
  else rmSync(work, { recursive: true, force: true });
  return failed ? 1 : 0;
}

process.exit(await main());
