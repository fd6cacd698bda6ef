// bench:sandbox — what starting a rollout's sandbox costs: from nothing to the harness's first instruction, with the
// workspace an overlay over the task image (what `rlgate run` does: nothing copied per rollout) against a plain copy
// of the workspace (cp -a, as a runner without overlays would do, then the same sandbox over the copy), for a small
// workspace (the example task) and a large one (files × size below). Medians of --runs.
// Then, where podman runs, the example task as an image task per rollout: a container started from the cached task
// image (what every rollout after the first does), against bwrap, against a cold image (the task image built first:
// what the first rollout of a task on a machine pays), and a whole podman rollout's sandbox work (agent container,
// commit, grading container, removal) with trivial commands.
//
//   npm run bench:sandbox [-- --runs 10 --files 4000 --kb 16 --cold-runs 3]
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { mountImage, podman, podmanUnavailable, removeContainers, unmountImage } from "../runner/podman.ts";
import { ensureHostImage } from "../runner/podman-host-image.ts";
import { preparePodmanImage, type PodmanImage } from "../runner/podman-image.ts";
import { gradeInPodman, startAgentContainer } from "../runner/podman-rollout.ts";
import { DEFAULT_LIMITS, ownTreeForSandbox, Sandbox, sandboxUnavailable } from "../runner/sandbox.ts";
import { loadTask, type Task } from "../runner/task.ts";

const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "10" },
    files: { type: "string", default: "4000" },
    kb: { type: "string", default: "16" },
    "cold-runs": { type: "string", default: "3" },
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
/** A container from `image` whose command reports at once: ms until it has (the container removed after). */
async function startContainer(image: string, imageRoot: string, name: string): Promise<number> {
  const started = performance.now();
  let first = 0;
  const task = { ...loadTask(join(new URL("..", import.meta.url).pathname, "examples", "tasks", "fix-add")), image };
  const dir = join(root, name);
  const box = startAgentContainer({
    name,
    image,
    imageRoot,
    dir,
    task,
    mounts: [],
    env: { PATH: "/usr/bin:/bin" },
    argv: ["echo", "started"],
    limits: DEFAULT_LIMITS,
    timeoutMs: 60_000,
  });
  box.child.stdout!.once("data", () => (first = performance.now()));
  const exit = await box.exited;
  removeContainers([name]);
  if (exit.code !== 0 || first === 0) throw new Error(`container failed: ${JSON.stringify(exit)}`);
  return first - started;
}

async function measurePodman(): Promise<void> {
  const base = await ensureHostImage();
  const example = join(new URL("..", import.meta.url).pathname, "examples", "tasks", "fix-add");
  const task = { ...loadTask(example), image: base };
  const prepared = preparePodmanImage(task);
  const imageRoot = mountImage(prepared.tag);
  try {
    await measureContainers(example, task, prepared, imageRoot, base);
  } finally {
    unmountImage(prepared.tag);
  }
}

async function measureContainers(
  example: string,
  task: Task,
  prepared: PodmanImage,
  imageRoot: string,
  base: string,
): Promise<void> {
  const bwrapStarts: number[] = [];
  const cached: number[] = [];
  const whole: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const dir = join(root, `bwrap-${i}`);
    mkdirSync(dir);
    bwrapStarts.push(await startSandbox(smallImage, dir));
    cached.push(await startContainer(prepared.tag, imageRoot, `rlgate-bench-${process.pid}-${i}`));
    // A whole rollout's container work: agent, fresh grading container, removal.
    const t0 = performance.now();
    const name = `rlgate-bench-${process.pid}-w${i}`;
    const rdir = join(root, `rollout-${i}`);
    mkdirSync(rdir);
    const agent = startAgentContainer({
      name,
      image: prepared.tag,
      imageRoot,
      dir: rdir,
      task,
      mounts: [],
      env: { PATH: "/usr/bin:/bin" },
      argv: ["true"],
      limits: DEFAULT_LIMITS,
      timeoutMs: 60_000,
    });
    await agent.exited;
    const graded = await gradeInPodman({
      agent: name,
      imageRoot,
      path: prepared.path,
      task: { ...task, verifier: "true", tests: null },
      sample: 0,
      branch: 0,
      dir: rdir,
      limits: DEFAULT_LIMITS,
    });
    if (graded.reward !== 1) throw new Error(`grading failed: ${graded.error} ${graded.log}`);
    whole.push(performance.now() - t0);
  }
  const cold: number[] = [];
  const coldRuns = Number(args["cold-runs"]);
  for (let i = 0; i < coldRuns; i++) {
    // A task image no run has built: the workspace differs by a file, so its content address does too.
    const variant = join(root, `cold-${i}`);
    cpSync(example, variant, { recursive: true });
    writeFileSync(join(variant, "workspace", "cold.txt"), `${process.pid} ${i}\n`);
    const t0 = performance.now();
    const image = preparePodmanImage({ ...loadTask(variant), image: base });
    const coldRoot = mountImage(image.tag);
    const built = performance.now() - t0;
    try {
      cold.push(built + (await startContainer(image.tag, coldRoot, `rlgate-bench-${process.pid}-c${i}`)));
    } finally {
      unmountImage(image.tag);
    }
    podman(["rmi", "--force", image.tag]);
  }
  const b = median(bwrapStarts);
  const c = median(cached);
  const k = coldRuns ? median(cold) : NaN;
  console.log(
    `\nper rollout, the example task (median of ${RUNS}; cold: ${coldRuns}), until its first instruction runs:`,
  );
  console.log(`  bwrap (overlay over the task folder)     ${b.toFixed(1).padStart(8)} ms`);
  console.log(
    `  podman, container from the cached image  ${c.toFixed(1).padStart(8)} ms   ${(c / b).toFixed(2)}x bwrap`,
  );
  console.log(
    `  podman, cold image (build, then start)   ${k.toFixed(1).padStart(8)} ms   ${(k / c).toFixed(1)}x cached`,
  );
  console.log(`  podman, a whole rollout's container work (agent, grader, removal) ${median(whole).toFixed(1)} ms`);
}

try {
  await measure("example task (2 files)", smallImage);
  await measure(`large (${files} files x ${kb} KiB = ${Math.round((files * kb) / 1024)} MiB)`, large);
  const noPodman = podmanUnavailable();
  if (noPodman) console.log(`\npodman: not measured (${noPodman})`);
  else await measurePodman();
} finally {
  rmSync(root, { recursive: true, force: true });
}
