// The clean-clone walk: every shell block of the given pages (default README.md), run verbatim and in order, as a
// newcomer would paste them, in a fresh copy of this working tree (its own store, a new HOME and /tmp) that shares this
// checkout's node_modules. Blocks marked `<!-- walk: skip (why) -->` are left out (scripts/readme-walk/blocks.ts).
// It runs in a network namespace of its own where `unshare` allows (the pages' fixed ports, 8700 and on, then never
// meet another gateway on this machine). It fails on the first block that fails, and when the gateway counted a
// harness call that was not ok (an upstream error, a refusal): a block can exit 0 over a call that went wrong.
//
//   npx tsx scripts/readme-walk.ts [--timeout 300] [--keep] [--each] [PAGE[+PAGE…]…]
//   npx tsx scripts/readme-walk.ts --all      (npm run test:docs-walk: README.md and every docs page, each on its own)
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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

const UNSHARE = ["--user", "--map-root-user", "--net", "--mount"];

/**
 * The command that runs `script` with bash: where this machine allows, in a network namespace of its own and with
 * `tmp` as its /tmp (the pages write /tmp/rlgate-…: a walk then never meets another walk's, or a reader's, files).
 */
function isolated(script: string, tmp: string): { command: string; args: string[]; isolation: string } {
  const ip = ipCommand();
  const probe = spawnSync("unshare", [...UNSHARE, "true"], { stdio: "ignore" });
  if (ip && probe.status === 0) {
    // Set up as the namespace's root, then run the blocks as a user, as a reader does (as root, nginx would hand its
    // files to a user this namespace does not map): the caller's uid, or 1000 when that is root.
    const uid = process.getuid?.() || 1000;
    const asUser = `unshare --user --map-user=${uid} --map-group=${process.getgid?.() || uid}`;
    const setup = `${ip} link set lo up && mount --bind "$1" /tmp && exec ${asUser} bash "$0"`;
    return {
      command: "unshare",
      args: [...UNSHARE, "bash", "-c", setup, script, tmp],
      isolation: "a network namespace and a /tmp of its own",
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

interface WalkResult {
  pages: string[];
  run: number;
  skipped: { where: string; why: string }[];
  seconds: number;
  ok: boolean;
}

/** Walks `pages`' blocks in one shell, in a fresh copy of the tree with its own HOME (and network namespace). */
async function walk(pages: string[], timeoutS: number, keep: boolean): Promise<WalkResult> {
  const started = Date.now();
  const blocks = pages.flatMap((page) => shellBlocks(page, readFileSync(join(ROOT, page), "utf8")));
  // Not under /tmp, which the walk replaces with a folder of its own.
  const work = mkdtempSync(join(existsSync("/var/tmp") ? "/var/tmp" : tmpdir(), "rlgate-walk-"));
  const checkout = join(work, "rlgate");
  const logs = join(work, "logs");
  const home = join(work, "home");
  const tmp = join(work, "tmp");
  for (const dir of [checkout, logs, home, tmp]) mkdirSync(dir, { recursive: true });
  copyWorkingTree(checkout, SHARED);
  const script = join(work, "walk.sh");
  writeFileSync(script, walkScript(blocks));

  const run = isolated(script, tmp);
  const skipped = blocks.flatMap((b) =>
    b.mode.kind === "skip" ? [{ where: `${b.file}:${b.line}`, why: b.mode.why }] : [],
  );
  const runnable = blocks.length - skipped.length;
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
  const timer = setTimeout(() => {
    console.error(`walk: timed out after ${timeoutS} s`);
    stopGroup("SIGKILL");
  }, timeoutS * 1000);
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
    if (bad.length > 0) {
      console.error("walk: a harness call was not ok: see the blocks' output above");
      failed = true;
    }
  }
  if (failed || keep) console.error(`walk: its files are in ${work}`);
  else rmSync(work, { recursive: true, force: true });
  return { pages, run: runnable, skipped, seconds: (Date.now() - started) / 1000, ok: !failed };
}

/** One line per walk, then its skips: what a reader of CI's log wants to know. */
function report(results: readonly WalkResult[]): string {
  const lines = ["walk summary:"];
  for (const r of results) {
    lines.push(
      `  ${r.ok ? "ok  " : "FAIL"} ${r.pages.join(" + ")}: ${r.run} run, ${r.skipped.length} skipped, ${r.seconds.toFixed(0)} s`,
    );
    for (const s of r.skipped) lines.push(`         skipped ${s.where}: ${s.why}`);
  }
  return lines.join("\n");
}

/** Pages read on from another's state: walked after it, in the same walk. */
const FOLLOWS: Record<string, string> = { "docs/cli.md": "README.md" };

/** README.md and every docs page with a shell block, each its own walk, a page that follows another after it. */
function everyPage(): string[] {
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`)
    .filter((page) => shellBlocks(page, readFileSync(join(ROOT, page), "utf8")).length > 0);
  const walks = ["README.md", ...docs.filter((page) => !FOLLOWS[page])];
  return walks.map((first) => [first, ...docs.filter((page) => FOLLOWS[page] === first)].join("+"));
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: {
      timeout: { type: "string", default: "300" },
      keep: { type: "boolean", default: false },
      each: { type: "boolean", default: false },
      all: { type: "boolean", default: false },
    },
    allowPositionals: true,
  });
  const pages = values.all ? everyPage() : positionals.length > 0 ? positionals : ["README.md"];
  // --each (and --all): every argument its own walk (a fresh tree, gateway and namespace); PAGE+PAGE walks pages that
  // go together (docs/cli.md uses the README's gateway and core) in one.
  const walks =
    values.each || values.all ? pages.map((arg) => arg.split("+")) : [pages.flatMap((arg) => arg.split("+"))];
  const results: WalkResult[] = [];
  for (const group of walks) results.push(await walk(group, Number(values.timeout), values.keep));
  console.error(report(results));
  return results.every((r) => r.ok) ? 0 : 1;
}

process.exit(await main());
