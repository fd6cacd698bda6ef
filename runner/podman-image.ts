// A task's image under podman: the task's OCI image with its workspace folder copied over the workdir (if it has
// one), its setup run without network, its git history squashed to one commit (as for folder tasks: no fix to read
// from a later commit) and the workdir handed to the container user. Built once and cached, content-addressed: the
// tag is a hash of the base image's id, the Containerfile and the workspace's files, so a second run of the same task
// (or any machine's run with the same inputs) finds it and starts rollouts at once.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ImageError, SQUASH } from "./image.ts";
import { baseUlimits, CONTAINER_UID, podman, podmanRuntime } from "./podman.ts";
import type { Task } from "./task.ts";

export interface PodmanImage {
  /** The prepared image's tag (localhost/rlgate-task:HASH). */
  tag: string;
  /** PATH as the image sets it (conda and the like put their tools on it). */
  path: string;
  /** True when it was already built (by an earlier run). */
  cached: boolean;
  log: string;
  ms: number;
}

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Hash of a folder's names, modes, link targets and contents, in a stable order. */
function hashTree(dir: string, hash = createHash("sha256"), rel = ""): ReturnType<typeof createHash> {
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const path = join(rel, name);
    const st = lstatSync(join(dir, path));
    hash.update(`${path}\0${st.mode}\0`);
    if (st.isDirectory()) hashTree(dir, hash, path);
    else if (st.isSymbolicLink()) hash.update(readlinkSync(join(dir, path)));
    else hash.update(readFileSync(join(dir, path)));
  }
  return hash;
}

// One RUN step (each step is a container start and a commit): the setup runs in a shell of its own, so that its own
// `exit` or `cd` ends only itself; its stderr joins its stdout in that shell (the build reads the two through separate
// pipes, which would reorder its lines); images without git keep their workspace as it is.
const PREPARE = `set -e; mkdir -p "$1"; cd "$1"; if [ -n "$2" ]; then (cd "$1" && bash -ec "$2" 2>&1); fi
if command -v git >/dev/null; then ${SQUASH}; fi; chown -R ${CONTAINER_UID}:${CONTAINER_UID} "$1"`;

export function containerfile(task: Task, baseId: string): string {
  const w = task.workdir;
  const run = ["bash", "-c", PREPARE, "prepare", w, task.setup ?? ""];
  return [
    `FROM ${baseId}`,
    "USER root",
    ...(task.workspace ? [`COPY . ${w}/`] : []),
    `RUN ${JSON.stringify(run)}`,
    `WORKDIR ${w}`,
    "",
  ].join("\n");
}

/** Finds or builds the task's image. The base image must be present (pulled or built); no registry is assumed. */
export function preparePodmanImage(task: Task): PodmanImage {
  const started = Date.now();
  if (!task.image) throw new ImageError(`task '${task.name}' names no image: --sandbox podman runs image tasks`);
  const inspect = podman(["image", "inspect", "--format", "{{.Id}} {{json .Config.Env}}", task.image]);
  if (inspect.status !== 0) {
    const pulled = podman(["pull", "--quiet", task.image]);
    if (pulled.status !== 0)
      throw new ImageError(
        `task '${task.name}': image ${task.image} is not here and cannot be pulled: ${pulled.stderr.trim().slice(-500)}`,
      );
    return preparePodmanImage(task);
  }
  const [baseId, envJson] = inspect.stdout.trim().split(/ (.*)/s);
  const env = (JSON.parse(envJson || "null") as string[] | null) ?? [];
  const path = env.find((e) => e.startsWith("PATH="))?.slice(5) ?? DEFAULT_PATH;
  const file = containerfile(task, baseId!);
  const hash = createHash("sha256").update(`${baseId}\n${file}`);
  if (task.workspace) hashTree(task.workspace, hash);
  const tag = `localhost/rlgate-task:${hash.digest("hex").slice(0, 20)}`;
  if (podman(["image", "exists", tag]).status === 0)
    return { tag, path, cached: true, log: "", ms: Date.now() - started };

  const scratch = mkdtempSync(join(tmpdir(), "rlgate-containerfile-"));
  try {
    writeFileSync(join(scratch, "Containerfile"), file);
    const runtime = podmanRuntime();
    // One stream (2>&1): a failing step's output keeps its order, and is cut out of the build's log below.
    const build = spawnSync(
      "bash",
      [
        "-c",
        'exec podman "$@" 2>&1',
        "podman",
        "build",
        ...(runtime ? ["--runtime", runtime] : []),
        "--network",
        "none",
        "--pull=never",
        "--layers=false",
        // Task images are a cache shared by runs (content-addressed), never reaped: labelled as what they are.
        "--label",
        "rlgate.image=task",
        ...baseUlimits(),
        "--tag",
        tag,
        "--file",
        join(scratch, "Containerfile"),
        task.workspace ?? scratch,
      ],
      { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
    );
    const log = `${build.stdout ?? ""}${build.error?.message ?? ""}`;
    if (build.status !== 0) {
      const exit = /exit status (\d+)/.exec(log)?.[1] ?? build.status;
      // What the failing step printed: after its "STEP i/n:" line, before podman's "Error: building at STEP".
      const lastStep = [...log.matchAll(/^STEP \d+\/\d+: .*$/gm)].pop();
      const end = log.lastIndexOf("Error: building at STEP");
      const output = lastStep && end > lastStep.index! ? log.slice(lastStep.index! + lastStep[0].length + 1, end) : log;
      throw new ImageError(
        `preparing the image of task '${task.name}' failed (exit ${exit}): ${output.trim().slice(-2000)}`,
      );
    }
    return { tag, path, cached: false, log, ms: Date.now() - started };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
