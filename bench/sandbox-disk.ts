// bench:sandbox-disk — what `rlgate run --disk` adds to a bwrap rollout's start: the sandbox over the example task
// as before (no quota), the same after making the rollout's filesystem of its own (sparse file, mkfs.ext4 without
// journal, loop mount; root only) and unmounting it afterwards, and a grading sandbox whose writable layer is a tmpfs
// mounted in its namespace. Medians of --runs, from nothing to the command's first output.
//
//   npx tsx bench/sandbox-disk.ts [--runs 15]
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { prepareImage } from "../runner/image.ts";
import { DEFAULT_LIMITS, ownForSandbox, Sandbox, sandboxUnavailable, type SandboxSpec } from "../runner/sandbox.ts";
import { diskMethod, rolloutDisk } from "../runner/sandbox-disk.ts";
import { loadTask } from "../runner/task.ts";

const { values: args } = parseArgs({ options: { runs: { type: "string", default: "15" } } });
const RUNS = Number(args.runs);
const root = mkdtempSync(join(tmpdir(), "rlgate-bench-disk-"));
chmodSync(root, 0o711);
const why = sandboxUnavailable(join(root, "probe"));
if (why) {
  console.error(`bench:sandbox-disk: sandboxes cannot start here: ${why}`);
  process.exit(1);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function started(spec: SandboxSpec): Promise<void> {
  let first = false;
  const box = new Sandbox(spec, { timeoutMs: 60_000 });
  box.child.stdout!.once("data", () => (first = true));
  const exit = await box.exited;
  if (exit.code !== 0 || !first) throw new Error(`sandbox failed: ${JSON.stringify(exit)}`);
}

function spec(image: string, writable: string, dir: string): SandboxSpec {
  return {
    lower: [image],
    upper: join(writable, "upper"),
    work: join(writable, "work"),
    mountpoint: join(dir, "mnt"),
    binds: [],
    env: { PATH: "/usr/bin:/bin" },
    argv: ["echo", "started"],
    limits: DEFAULT_LIMITS,
  };
}

const task = loadTask(join(import.meta.dirname, "..", "examples", "tasks", "fix-add"));
const { dir: image } = await prepareImage(task, join(root, "t"), DEFAULT_LIMITS);
const method = diskMethod(join(root, "disk-probe"));
const cases: Record<string, (dir: string) => Promise<void>> = {
  "no quota (before --disk)": (dir) => started(spec(image, dir, dir)),
  ...(method.kind === "loop"
    ? {
        "--disk 2g: ext4 on a loop device": async (dir: string) => {
          const disk = rolloutDisk(dir, DEFAULT_LIMITS.diskBytes!, method);
          await started(spec(image, disk.dir, dir));
          const failed = disk.release();
          if (failed) throw new Error(failed);
        },
      }
    : {}),
  "grading: writable layer on a tmpfs": (dir) =>
    started({
      ...spec(image, join(dir, "scratch"), dir),
      scratch: { dir: join(dir, "scratch"), bytes: DEFAULT_LIMITS.diskBytes! },
    }),
};
if (method.kind === "watch") console.log(`(no loop mounts here: ${method.why})`);
const times: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
// Interleaved, so that load from elsewhere falls on every case alike.
for (let i = 0; i < RUNS; i++)
  for (const [name, run] of Object.entries(cases)) {
    const dir = join(root, `run-${i}-${name.length}`);
    mkdirSync(dir);
    ownForSandbox(dir);
    const t0 = performance.now();
    await run(dir);
    times[name]!.push(performance.now() - t0);
    rmSync(dir, { recursive: true, force: true });
  }
const base = median(times["no quota (before --disk)"]!);
for (const [name, xs] of Object.entries(times))
  console.log(`${name.padEnd(36)} ${median(xs).toFixed(1).padStart(7)} ms   ${(median(xs) / base).toFixed(2)}x`);
rmSync(root, { recursive: true, force: true });
