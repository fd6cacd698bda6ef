// `rlgate run`: tasks × n rollouts of a harness, each in its own sandbox, at most `concurrency` at a time.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, realpathSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { entropyTopK, planBranches, type BranchJob, type BranchOptions } from "./branch.ts";
import { ControlClient } from "./control-client.ts";
import type { Harness } from "./harnesses.ts";
import { prepareImage, type TaskImage } from "./image.ts";
import { mountImage, podmanUnavailable, unmountImage } from "./podman.ts";
import { preparePodmanImage } from "./podman-image.ts";
import { KubernetesCluster } from "./kubernetes-cluster.ts";
import type { KubeTarget } from "./kubernetes-rollout.ts";
import { runRollout, type RolloutResult, type Stage } from "./rollout.ts";
import {
  removeSandboxFolder,
  SANDBOX_HOST_UID,
  sandboxUnavailable,
  SandboxError,
  type SandboxLimits,
} from "./sandbox.ts";
import { markRunFolder, reapDeadRunnerDisks } from "./disk-reap.ts";
import { diskMethod, type DiskMethod } from "./sandbox-disk.ts";
import type { Task } from "./task.ts";

export type SandboxKind = "bwrap" | "podman" | "kubernetes";

/** Where `--sandbox kubernetes` runs rollouts (docs/deploy.md#kubernetes). */
export interface KubernetesOptions {
  namespace: string;
  /** The rlgate image rollout Pods copy node, the harness CLIs and the in-sandbox scripts from. */
  toolsImage: string;
  /** The gateway's Service as Pods reach it, HOST:PORT. */
  gatewayService: string;
  /** Labels of the gateway's Pods (the rollout NetworkPolicy's one egress). */
  gatewayLabels: Record<string, string>;
}

export interface RunOptions {
  tasks: Task[];
  /** bwrap (default): folder tasks in bubblewrap sandboxes; podman: tasks that name an OCI image, in containers. */
  sandbox?: SandboxKind;
  kubernetes?: KubernetesOptions;
  harness: Harness;
  n: number;
  concurrency: number;
  /** Harness timeout per rollout; default: the task's own (task.json `timeout`), else DEFAULT_TIMEOUT_SEC. */
  timeoutSec?: number;
  gatewayUrl: string;
  token?: string;
  limits: SandboxLimits;
  /** Folder for images and rollout folders (a temporary one by default, removed afterwards). */
  workDir?: string;
  keep?: boolean;
  /** Variables for the harness, set after the preset's (--env). */
  env?: Record<string, string>;
  /** More folders every sandbox sees read-only (e.g. where a harness CLI is installed); their bin/ goes on PATH. */
  mountReadOnly?: string[];
  signal?: AbortSignal;
  /** Recorded on every rollout (metadata.generation) and part of its group (`task@generation`), so that runs of
   * one task for successive policy versions never share a group. */
  generation?: string;
  /** The training round given to every rollout (control API `round`, e.g. the training step). */
  round?: number;
  /** Model passed to presets; the gateway's served model by default. */
  model?: string;
  events?: RunEvents;
  /** After each rollout, K branches of it (runner/branch.ts); the group then holds n × (1 + K) rollouts. */
  branching?: BranchOptions;
}

export interface RunEvents {
  image?(task: Task, image: Pick<TaskImage, "ms"> | { error: string }): void;
  stage?(key: RolloutKey, stage: Stage, detail?: string): void;
  done?(key: RolloutKey, result: RolloutResult): void;
  /** Something the user should know about the whole run (one line). */
  notice?(message: string): void;
}

export interface RolloutKey {
  task: string;
  sample: number;
  /** A branch of that sample's backbone: its number, or null for one that could not be planned. */
  branch?: number | null;
}

export const DEFAULT_TIMEOUT_SEC = 600;
const ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * What every sandbox sees read-only besides the system folders, at the same paths as outside: rlgate's node_modules
 * (the harness CLIs; its .bin goes first on PATH), Node's own install when it is not under /usr (nvm and the like),
 * and the folders the user names (--mount-ro: CLIs installed elsewhere).
 */
function sandboxTools(extra: string[]): { binds: { src: string; dest: string }[]; pathPrefix: string[] } {
  const binds: { src: string; dest: string }[] = [];
  const pathPrefix: string[] = [];
  const nm = join(ROOT, "node_modules");
  if (existsSync(nm)) {
    const real = realpathSync(nm);
    binds.push({ src: real, dest: real });
    pathPrefix.push(join(real, ".bin"));
  }
  const nodePrefix = dirname(dirname(realpathSync(process.execPath)));
  // Not /usr itself (Node from a distribution package): bound over a container's /usr, it would hide the image's.
  if (nodePrefix !== "/usr" && !nodePrefix.startsWith("/usr/")) {
    binds.push({ src: nodePrefix, dest: nodePrefix });
    pathPrefix.push(join(nodePrefix, "bin"));
  }
  for (const dir of extra) {
    if (!existsSync(dir)) throw new SandboxError(`--mount-ro ${dir}: no such folder`);
    const real = realpathSync(dir);
    binds.push({ src: real, dest: resolve(dir) });
    if (existsSync(join(real, "bin"))) pathPrefix.push(join(resolve(dir), "bin"));
  }
  return { binds, pathPrefix };
}

/**
 * As root, sandboxes run as an unprivileged uid, which must be able to walk down to their folders (bwrap mounts them
 * as that uid, and fails with only "Permission denied" when it cannot). `what` names the folder for the user.
 */
function unreachableBySandbox(dir: string, what: string, otherwise: string): void {
  if (process.getuid?.() !== 0) return;
  for (let d = resolve(dir); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) {
      throw new SandboxError(
        `${d} is not searchable by the sandboxes' user (uid ${SANDBOX_HOST_UID}, rlgate runs as root), and ${what} ${resolve(dir)} is under it: chmod o+x ${d}, or ${otherwise}`,
      );
    }
    if (d === dirname(d)) return;
  }
}

function kubernetesTarget(k: KubernetesOptions | undefined): KubeTarget {
  if (!k?.toolsImage)
    throw new SandboxError("--sandbox kubernetes needs --tools-image (the rlgate image Pods copy tools from)");
  const [host, port] = k.gatewayService.split(/:(?=\d+$)/);
  if (!host || !port) throw new SandboxError(`--gateway-service ${k.gatewayService}: expected HOST:PORT`);
  return {
    cluster: new KubernetesCluster(),
    namespace: k.namespace,
    toolsImage: k.toolsImage,
    gateway: { host, port: Number(port), podLabels: k.gatewayLabels },
  };
}

export async function runTasks(o: RunOptions): Promise<RolloutResult[]> {
  const kind = o.sandbox ?? "bwrap";
  for (const task of o.tasks) {
    if (kind !== "bwrap" && !task.image)
      throw new SandboxError(
        `task '${task.name}' names no image: --sandbox ${kind} runs tasks with "image" in task.json`,
      );
    // Nodes pull the image as it is: what preparing adds (workspace/, setup, the squash) is podman's to build.
    if (kind === "kubernetes" && (task.workspace || task.setup))
      throw new SandboxError(
        `task '${task.name}' has a workspace/ folder or a setup: build its image with --sandbox podman, push it, and name that image`,
      );
    if (kind === "bwrap" && task.image)
      throw new SandboxError(`task '${task.name}' runs in the image ${task.image}: use --sandbox podman`);
  }
  const base = o.workDir ?? tmpdir();
  mkdirSync(base, { recursive: true });
  if (kind === "bwrap") unreachableBySandbox(base, "the work folder", "choose another --work-dir");
  const root = mkdtempSync(join(base, "rlgate-run-"));
  const mounted: string[] = [];
  // The sandbox's user (not the runner's, when the runner is root) walks through here to its own folders.
  chmodSync(root, 0o711);
  try {
    const cluster = kind === "kubernetes" ? kubernetesTarget(o.kubernetes) : undefined;
    const why =
      kind === "podman"
        ? podmanUnavailable()
        : cluster
          ? await cluster.cluster.unavailable(cluster.namespace)
          : sandboxUnavailable(join(root, "probe"));
    if (why) throw new SandboxError(`cannot sandbox rollouts on this machine: ${why}`);
    let disk: DiskMethod | undefined;
    if (kind === "bwrap" && o.limits.diskBytes !== undefined) {
      disk = diskMethod(join(root, "disk-probe"));
      if (disk.kind === "watch") o.events?.notice?.(`--disk is not a hard limit here: ${disk.why}`);
      else {
        markRunFolder(root);
        reapDeadRunnerDisks();
      }
    }
    const control = new ControlClient(o.gatewayUrl, o.token);
    await control.check();
    const model = o.model ?? (await control.servedModel());
    const install = sandboxTools(o.mountReadOnly ?? []);
    if (kind === "bwrap")
      for (const { src } of install.binds)
        unreachableBySandbox(src, "the sandboxes' tools folder", "install rlgate (or pass --mount-ro) elsewhere");
    // `branched`: a branch's job (one that could not be made too), which has no branches of its own.
    const jobs: {
      task: Task;
      sample: number;
      image: string | { error: string };
      branch?: BranchJob;
      branched?: boolean;
    }[] = [];
    // podman: PATH as each task's image sets it, and its root folder, mounted on the host until the run ends.
    const paths = new Map<Task, string>();
    const roots = new Map<Task, string>();
    for (const [t, task] of o.tasks.entries()) {
      // Short folder names: the bridge's socket path must fit in sun_path (108 bytes).
      // A task whose image cannot be made (its setup failed) still has its rollouts: each finishes as infra_error.
      const made =
        kind === "kubernetes"
          ? Promise.resolve({ dir: task.image!, ms: 0 })
          : kind === "podman"
            ? Promise.resolve().then(() => {
                const p = preparePodmanImage(task);
                paths.set(task, p.path);
                roots.set(task, mountImage(p.tag));
                mounted.push(p.tag);
                return { dir: p.tag, ms: p.ms };
              })
            : prepareImage(task, join(root, `t${t}`), o.limits, o.signal);
      const image = await made.then(
        (done): { dir: string; ms: number } => done,
        (error: unknown) => ({ error: error instanceof Error ? error.message : String(error) }),
      );
      o.events?.image?.(task, image);
      for (let sample = 0; sample < o.n; sample++)
        jobs.push({ task, sample, image: "error" in image ? image : image.dir });
    }
    const results: RolloutResult[] = [];
    const branches = o.branching?.k ?? 0;
    // With --branch, a finished backbone queues its branches: workers wait for them while backbones still run.
    let next = 0;
    let running = 0;
    let waiting: Array<() => void> = [];
    const waitForJobs = () => new Promise<void>((resolve) => waiting.push(resolve));
    const worker = async () => {
      while (!o.signal?.aborted) {
        if (next >= jobs.length) {
          if (running === 0 || branches === 0) break;
          await waitForJobs();
          continue;
        }
        const i = next++;
        running++;
        const { task, sample, image, branch, branched } = jobs[i]!;
        const key: RolloutKey = { task: task.name, sample, ...(branched ? { branch: branch?.index ?? null } : {}) };
        results[i] = await runRollout({
          task,
          image,
          backend: kind,
          kubernetes: cluster,
          imagePath: paths.get(task),
          imageRoot: roots.get(task),
          sample,
          groupSize: o.n * (1 + branches),
          group: o.generation === undefined ? task.name : `${task.name}@${o.generation}`,
          generation: o.generation,
          round: o.round,
          harness: o.harness,
          control,
          model,
          dir: join(root, `r${i}`),
          timeoutMs: (o.timeoutSec ?? task.timeoutSec ?? DEFAULT_TIMEOUT_SEC) * 1000,
          limits: o.limits,
          binds: install.binds,
          pathPrefix: install.pathPrefix,
          env: o.env,
          rolloutKeyToBridge: Boolean(o.token),
          keep: o.keep ?? false,
          signal: o.signal,
          onStage: (stage, detail) => o.events?.stage?.(key, stage, detail),
          branch,
          ...(o.branching && !branched ? { entropyTopK: entropyTopK(o.branching) } : {}),
          diskMethod: disk,
        });
        o.events?.done?.(key, results[i]!);
        if (o.branching && !branched) {
          const plan = await planBranches(control, results[i]!, o.branching);
          if ("jobs" in plan) for (const b of plan.jobs) jobs.push({ task, sample, image, branch: b, branched: true });
          // A backbone without branches still fills its group: its K rollouts end as infra_error, saying why.
          else
            for (let k = 0; k < branches; k++) jobs.push({ task, sample, image: { error: plan.skip }, branched: true });
        }
        running--;
        const woken = waiting;
        waiting = [];
        for (const w of woken) w();
      }
    };
    const total = jobs.length * (1 + branches);
    await Promise.all(Array.from({ length: Math.max(1, Math.min(o.concurrency, total)) }, worker));
    return results.filter(Boolean);
  } finally {
    for (const tag of mounted) unmountImage(tag);
    if (!o.keep) removeSandboxFolder(root);
  }
}
