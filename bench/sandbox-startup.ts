// bench:sandbox — what starting a rollout's sandbox costs: from nothing to the harness's first instruction, with the
// workspace an overlay over the task image (what `rlgate run` does: nothing copied per rollout) against a plain copy
// of the workspace (cp -a, as a runner without overlays would do, then the same sandbox over the copy), for a small
// workspace (the example task) and a large one (files × size below). Medians of --runs.
//
//   npm run bench:sandbox [-- --runs 10 --files 4000 --kb 16]
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { DEFAULT_LIMITS, ownTreeForSandbox, Sandbox, sandboxUnavailable } from "../runner/sandbox.ts";

const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "10" },
    files: { type: "string", default: "4000" },
    kb: { type: "string", default: "16" },
  },
});
const RUNS = Number(args.runs);
const root = mkdtempSync(join(tmpdir(), "rlgate-bench-sandbox-"));
chmodSync(root, 0o711);
const why = sandboxUnavailable(join(root, "probe"));
if (why) {
  console.error(`bench:sandbox: sandboxes cannot start here: ${why}`);
  process.exit(1);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Starts a sandbox over `lower` whose command reports at once, and returns the ms until it has (sandbox gone). */
async function startSandbox(lower: string, dir: string): Promise<number> {
  const started = performance.now();
  let first = 0;
  const box = new Sandbox(
    {
      lower: [lower],
      upper: join(dir, "upper"),
      work: join(dir, "work"),
      mountpoint: join(dir, "mnt"),
      binds: [],
      env: { PATH: "/usr/bin:/bin" },
      argv: ["echo", "started"],
      limits: DEFAULT_LIMITS,
    },
    { timeoutMs: 60_000 },
  );
  box.child.stdout!.once("data", () => (first = performance.now()));
  const exit = await box.exited;
  if (exit.code !== 0 || first === 0) throw new Error(`sandbox failed: ${JSON.stringify(exit)}`);
  return first - started;
}

async function measure(name: string, image: string): Promise<void> {
  const slug = name.split(" ")[0]!;
  ownTreeForSandbox(image);
  const overlay: number[] = [];
  const copied: number[] = [];
  const copyOnly: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const a = join(root, `${slug}-overlay-${i}`);
    mkdirSync(a);
    overlay.push(await startSandbox(image, a));
    rmSync(a, { recursive: true, force: true });

    const b = join(root, `${slug}-copy-${i}`);
    mkdirSync(b);
    const t0 = performance.now();
    cpSync(image, join(b, "ws"), { recursive: true });
    copyOnly.push(performance.now() - t0);
    ownTreeForSandbox(join(b, "ws"));
    // The copy is the workspace: mounted as the overlay's only (empty-lowered) layer, the same sandbox start follows.
    mkdirSync(join(b, "empty"));
    ownTreeForSandbox(b);
    const t1 = performance.now();
    const box = new Sandbox(
      {
        lower: [join(b, "empty")],
        upper: join(b, "ws"),
        work: join(b, "work"),
        mountpoint: join(b, "mnt"),
        binds: [],
        env: { PATH: "/usr/bin:/bin" },
        argv: ["echo", "started"],
        limits: DEFAULT_LIMITS,
      },
      { timeoutMs: 60_000 },
    );
    let first = 0;
    box.child.stdout!.once("data", () => (first = performance.now()));
    await box.exited;
    copied.push(copyOnly[i]! + (first - t1));
    rmSync(b, { recursive: true, force: true });
  }
  const o = median(overlay);
  const c = median(copied);
  console.log(
    `${name.padEnd(34)} overlay ${o.toFixed(1).padStart(7)} ms   copy+sandbox ${c.toFixed(1).padStart(7)} ms (copy alone ${median(copyOnly).toFixed(1)} ms)   copy/overlay ${(c / o).toFixed(2)}x`,
  );
}

const small = join(new URL("..", import.meta.url).pathname, "examples", "tasks", "fix-add", "workspace");
const smallImage = join(root, "small-image");
cpSync(small, smallImage, { recursive: true });
const large = join(root, "large-image");
const files = Number(args.files);
const kb = Number(args.kb);
for (let i = 0; i < files; i++) {
  const dir = join(large, `pkg${i % 64}`, `mod${i % 16}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `f${i}.py`), Buffer.alloc(kb * 1024, 97 + (i % 26)));
}
spawnSync("sync");
console.log(`sandbox start-up, median of ${RUNS} runs (prepare until the harness's first instruction runs)`);
try {
  await measure("example task (2 files)", smallImage);
  await measure(`large (${files} files x ${kb} KiB = ${Math.round((files * kb) / 1024)} MiB)`, large);
} finally {
  rmSync(root, { recursive: true, force: true });
}
