// The agent and grade stages of a rollout under podman (the stages themselves are runner/rollout.ts's):
//   agent  a container whose root is the task's prepared image under a writable layer on the rollout's disk, its
//          workspace a mount of its own (runner/podman-storage.ts): no network but the bridge's Unix socket, the
//          container user, limits; the harness CLIs and node come from the host, read-only
//   grade  a fresh container whose root is the pristine task image again, with the agent's workspace changes — and
//          nothing else the agent wrote (its /tmp, HOME, user site, site-packages, /etc are in its root layer, dropped
//          when it exits) — and none of its processes; runner/podman-grade-init.cjs restores the test paths from the
//          pristine image, puts the hidden tests in and runs the test command as the container user; it alone writes
//          the result, to a folder of the runner's that the test command cannot reach; the reward is read from that file
import { textTail } from "../util/text-tail.ts";
import { chmodSync, lstatSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnSync } from "node:child_process";
import {
  Container,
  CONTAINER_UID,
  MEMORY_FOLDERS,
  podman,
  releaseWith,
  removeContainers,
  type Mount,
} from "./podman.ts";
import { reapOnce } from "./podman-reap.ts";
import { RolloutStorage } from "./podman-storage.ts";
import { STARTUP_HOOKS } from "./bwrap-grade.ts";
import { SandboxError, type SandboxExit, type SandboxLimits } from "./sandbox.ts";
import type { Task } from "./task.ts";
import { testOutcomes, type TestsVerdict } from "./datasets-test-log.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
const NODE_IN_CONTAINER = "/opt/rlgate/bin/node";
const GRADER = "/opt/rlgate/grade-init.cjs";

/** The host's node, bind-mounted: the bridge's listener and the harness CLIs run on it inside any image. */
export function nodeMount(): Mount {
  return { type: "bind", src: realpathSync(process.execPath), dest: NODE_IN_CONTAINER };
}
export const CONTAINER_BIN = dirname(NODE_IN_CONTAINER);

export interface PodmanAgentOptions {
  name: string;
  image: string;
  /** The task image's root folder, mounted on the host (mountImage): the container's read-only lower layer. */
  imageRoot: string;
  /** The rollout's folder: its storage goes here (removed with it). */
  dir: string;
  task: Task;
  mounts: Mount[];
  env: Record<string, string>;
  argv: string[];
  limits: SandboxLimits;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** The runner stops a stage at its own limit first (and records why); the container's own limit is this much later. */
const CONTAINER_TIMEOUT_MARGIN_SEC = 10;

const storages = new Map<string, RolloutStorage>();
const imageEnvs = new Map<string, string[]>();

/** The image's environment (ENV lines): a container on a root folder gets only what it is given. */
function imageEnv(tag: string): Record<string, string> {
  if (!imageEnvs.has(tag)) {
    const r = podman(["image", "inspect", "--format", "{{json .Config.Env}}", tag]);
    imageEnvs.set(tag, r.status === 0 ? ((JSON.parse(r.stdout || "null") as string[] | null) ?? []) : []);
  }
  return Object.fromEntries(imageEnvs.get(tag)!.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
}

/**
 * A folder inside a root folder on the host, for a path in the container (`/testbed` → ROOT/testbed), or null where a
 * part of it is a symbolic link: the host would resolve it against its own root (an image's `/tmp → /etc` would be the
 * host's /etc), so such a path is never used from the host. Missing parts are made when `create`.
 */
function folderInRoot(root: string, path: string, create: boolean): string | null {
  let at = root;
  for (const part of path.split("/").filter(Boolean)) {
    if (part === "..") return null;
    at = join(at, part);
    let st;
    try {
      st = lstatSync(at);
    } catch {
      if (!create) return null;
      mkdirSync(at);
      continue;
    }
    if (!st.isDirectory()) return null;
  }
  return at;
}

/** The workdir in the image's root, a real folder (a link there could name any folder of the host's). */
function workdirIn(root: string, task: Task): string {
  const dir = folderInRoot(root, task.workdir, false);
  if (!dir)
    throw new SandboxError(`the workdir ${task.workdir} is not a folder in the task image (or a part of it is a link)`);
  return dir;
}

/** The memory folders' mount points world-writable and sticky, as they should be: runc gives a tmpfs the mode of the
 * folder it covers, and images made without a umask-proof chmod have /tmp 1755 (the container user cannot write it).
 * One that is a link is left as it is (runc resolves it inside the container). */
function openTemporaryFolders(root: string): void {
  for (const d of MEMORY_FOLDERS) {
    const path = folderInRoot(root, d, true);
    if (path) chmodSync(path, 0o1777);
  }
}

function copyTree(src: string, dest: string): void {
  const r = spawnSync("cp", ["-a", "--", src, dest], { encoding: "utf8" });
  if (r.status !== 0) throw new SandboxError(`copying ${src} to the rollout's disk failed: ${r.stderr.trim()}`);
}

export function startAgentContainer(o: PodmanAgentOptions): Container {
  reapOnce();
  if (!o.imageRoot) throw new SandboxError("the podman backend needs the task image mounted on the host (imageRoot)");
  const storage = new RolloutStorage(o.dir, o.limits.diskBytes);
  storages.set(o.name, storage);
  releaseWith(o.name, () => {
    storages.delete(o.name);
    storage.release();
  });
  const root = storage.overlay("root", [o.imageRoot]);
  openTemporaryFolders(root);
  const workspace = storage.overlay("ws", [workdirIn(o.imageRoot, o.task)]);
  // Folders the agent writes besides the workspace: copied onto the rollout's disk (the harness's home, made by
  // the runner), so the disk limit counts them too.
  const mounts = o.mounts.map((m) => {
    if (!m.rw) return m;
    const copy = join(storage.disk, `bind-${m.dest.replace(/[^a-zA-Z0-9]+/g, "_")}`);
    copyTree(m.src, copy);
    return { ...m, src: copy };
  });
  const box = new Container(
    {
      name: o.name,
      image: { rootfs: root },
      timeoutSec: o.timeoutMs / 1000 + CONTAINER_TIMEOUT_MARGIN_SEC,
      user: `${CONTAINER_UID}:${CONTAINER_UID}`,
      workdir: o.task.workdir,
      mounts: [nodeMount(), { type: "bind", src: workspace, dest: o.task.workdir, rw: true }, ...mounts],
      env: { ...imageEnv(o.image), ...o.env },
      argv: o.argv,
      limits: o.limits,
    },
    { timeoutMs: o.timeoutMs, signal: o.signal },
  );
  // The agent's root layer is never graded: gone as soon as the agent is, with the space it took; its workspace
  // layer stays for grading.
  void box.exited.then(() => {
    storage.drop("root");
    storage.close("ws");
  });
  return box;
}

export interface PodmanGrade {
  exit: SandboxExit;
  log: string;
  /** The reward, or null with `error` (an infra error: grading could not be set up or ran past its time). */
  reward: number | null;
  error: string | null;
  verdict: TestsVerdict | null;
}

export interface GraderResult {
  stage: "setup" | "test";
  code: number | null;
  signal: string | null;
  error: string | null;
  log: string;
  timedOut: boolean;
}

export async function gradeInPodman(o: {
  agent: string;
  /** The task image's root folder, mounted on the host (mountImage): the pristine test paths come from it. */
  imageRoot: string;
  path: string;
  task: Task;
  sample: number;
  /** The branch's number (0: not a branch), for the grader as bwrap's gets it. */
  branch: number;
  dir: string;
  limits: SandboxLimits;
  signal?: AbortSignal;
}): Promise<PodmanGrade> {
  const grader = `${o.agent}-grade`;
  const result = join(o.dir, "result");
  // Root's alone: the test command (uid 1000) can neither read nor write it; only the grader (root) writes.
  mkdirSync(result, { recursive: true });
  chmodSync(result, 0o700);
  try {
    const storage = storages.get(o.agent);
    if (!storage) throw new Error(`the agent container ${o.agent} has no storage to grade`);
    storage.drop("root");
    storage.close("ws");
    // A fresh root from the pristine image; the workspace is the agent's changes over the image's, and what grading
    // writes goes to layers of its own, in memory: a full disk of the agent's does not fail its grading.
    const scratch = storage.scratch(o.limits.diskBytes ?? o.limits.memoryBytes);
    const root = storage.overlay("groot", [o.imageRoot], scratch);
    openTemporaryFolders(root);
    const workspace = storage.overlay("gws", [storage.upper("ws"), workdirIn(o.imageRoot, o.task)], scratch);
    const mounts: Mount[] = [
      nodeMount(),
      { type: "bind", src: workspace, dest: o.task.workdir, rw: true },
      { type: "bind", src: join(HERE, "podman-grade-init.cjs"), dest: GRADER },
      { type: "bind", src: o.imageRoot, dest: "/rlgate/image" },
      { type: "bind", src: result, dest: "/rlgate/result", rw: true },
    ];
    if (o.task.tests) mounts.push({ type: "bind", src: o.task.tests, dest: "/rlgate/tests" });
    if (o.task.testPatch) {
      const patch = join(o.dir, "test.patch");
      writeFileSync(patch, o.task.testPatch);
      chmodSync(patch, 0o644);
      mounts.push({ type: "bind", src: patch, dest: "/rlgate/test.patch" });
    }
    const timeoutSec = o.task.verifierTimeoutSec;
    const box = new Container(
      {
        name: grader,
        image: { rootfs: root },
        // The grader stops the test command at verifier_timeout itself; the container gets a margin for the rest.
        timeoutSec: timeoutSec + 60 + CONTAINER_TIMEOUT_MARGIN_SEC,
        user: "0:0",
        caps: ["SETUID", "SETGID"],
        workdir: o.task.workdir,
        mounts,
        env: {},
        argv: [
          NODE_IN_CONTAINER,
          GRADER,
          JSON.stringify({
            uid: CONTAINER_UID,
            workdir: o.task.workdir,
            testsDir: o.task.testsDir,
            testPaths: o.task.testPaths,
            startupHooks: STARTUP_HOOKS,
            verifier: o.task.verifier,
            timeoutSec,
            sample: o.sample,
            branch: o.branch,
            path: o.path,
          }),
        ],
        limits: o.limits,
      },
      // The grader stops the test command at verifier_timeout itself; the container gets a margin for the rest.
      { timeoutMs: timeoutSec * 1000 + 60_000, signal: o.signal },
    );
    let log = "";
    const add = (d: Buffer) => {
      log = (log + d.toString("utf8")).slice(-16_384);
    };
    box.child.stdout!.on("data", add);
    box.child.stderr!.on("data", add);
    const exit = await box.exited;
    let r: GraderResult | null = null;
    try {
      r = JSON.parse(readFileSync(join(result, "result.json"), "utf8")) as GraderResult;
    } catch {
      /* judged below */
    }
    return { exit, log, ...judgeGrade(o.task, r, r?.log ?? "", exitText(exit)) };
  } finally {
    // The agent's container goes too (rollout.ts removes it again, harmlessly), and the rollout's mounts with it.
    removeContainers([o.agent, grader]);
  }
}

/** The reward from the grader's result (podman's file, Kubernetes' termination message), or why there is none.
 * `log` is the test command's output the named tests are read from. */
export function judgeGrade(
  task: Task,
  r: GraderResult | null,
  log: string,
  exitText: string,
): Pick<PodmanGrade, "reward" | "error" | "verdict"> {
  const none = (error: string) => ({ reward: null, error, verdict: null });
  if (!r) return none(`the grader wrote no result (${exitText})`);
  if (r.timedOut) return none(`grading ran past verifier_timeout (${task.verifierTimeoutSec} s)`);
  if (r.stage === "setup") return none(`grading could not be set up: ${textTail(r.log, 500)}`);
  if (r.error) return none(`the test command could not start: ${r.error}`);
  if (task.reward.kind === "exit_code") return { reward: r.code === 0 ? 1 : 0, error: null, verdict: null };
  const verdict = testOutcomes(log, task.reward);
  return { reward: verdict.passed ? 1 : 0, error: null, verdict };
}

function exitText(exit: SandboxExit): string {
  if (exit.stopped) return `stopped: ${exit.stopped}`;
  if (exit.startError) return `could not start: ${exit.startError}`;
  return exit.signal ? `killed by ${exit.signal}` : `exit ${exit.code}`;
}
