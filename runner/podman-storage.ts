// The writable storage of one podman rollout, on the host. Everything the agent or its grader can write outside
// memory lives on it, so that a disk limit bounds all of it at once:
//   disk/        the rollout's filesystem: with a disk limit, an ext4 file of that size loop-mounted here (ext4 on the
//                host cannot give overlayfs a quota: `--storage-opt size=` needs xfs with project quotas), else a folder
//   root         the container's root: an overlay of the pristine task image (read-only) under disk/root-up
//   ws           the workspace: an overlay of the image's workdir under disk/ws-up, bound over the workdir in the
//                container — a mount of its own, so the agent can neither remove nor replace it
// The grader gets a fresh root over the pristine image and a workspace whose layers are the agent's ws-up over the
// image's workdir: nothing else the agent wrote (its root layer: /tmp, HOME, site-packages, /etc…) reaches grading.
//
// Every mount point is under a folder named after the runner (pm.<pid>.<start time>): a runner that starts finds the
// mounts a dead runner left in /proc/self/mountinfo and releases them (runner/podman-reap.ts).
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, chownSync, closeSync, ftruncateSync, lstatSync, mkdirSync, openSync, statSync } from "node:fs";
import { join } from "node:path";
import { SandboxError } from "./sandbox.ts";
import { RUNNER_TAG } from "./podman-runner-id.ts";

function run(argv: string[]): void {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8", timeout: 120_000 });
  if (r.status !== 0)
    throw new SandboxError(
      `${argv.slice(0, 3).join(" ")} failed: ${`${r.stderr ?? ""}${r.error?.message ?? ""}`.trim()}`,
    );
}

/**
 * Removes a folder without holding up the runner's event loop (which serves every rollout's bridge): a layer the agent
 * filled with an install can take seconds. Its space comes back as it goes; never throws.
 */
function removeInBackground(path: string): void {
  spawn("rm", ["-rf", "--", path], { stdio: "ignore" }).on("error", () => {});
}

/** Unmounts, detaching what still uses it (a container being torn down); never throws. */
export function unmount(path: string): boolean {
  return spawnSync("umount", ["--lazy", path]).status === 0;
}

/** Overlay options are comma- and colon-separated: a path holding either would change the mount. */
function checked(path: string): string {
  if (/[,:\n]/.test(path)) throw new SandboxError(`path not usable in an overlay mount (',' ':' or newline): ${path}`);
  return path;
}

export class RolloutStorage {
  /** pm.<runner>: every mount of this rollout is under it. */
  readonly dir: string;
  readonly disk: string;
  readonly #mounts: string[] = [];

  /** @param diskBytes the limit on everything written to disk (none: a plain folder on the host's disk) */
  constructor(rolloutDir: string, diskBytes: number | undefined) {
    this.dir = join(rolloutDir, `pm.${RUNNER_TAG}`);
    this.disk = join(this.dir, "disk");
    mkdirSync(this.disk, { recursive: true });
    if (diskBytes === undefined) return;
    const image = join(this.dir, "disk.img");
    // Sparse: the file takes on the host only what is written into it.
    const fd = openSync(image, "w", 0o600);
    try {
      ftruncateSync(fd, diskBytes);
    } finally {
      closeSync(fd);
    }
    // No journal and no reserved blocks: the agent gets the whole size; lazy init makes mkfs ~0.1 s even at 10 GiB.
    run(["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "lazy_itable_init=1", image]);
    run(["mount", "-o", "loop", image, this.disk]);
    this.#mounts.push(this.disk);
  }

  /** Mounts an overlay of `lower` (top first) with its writable layer on the disk as `name`-up; returns its root. */
  overlay(name: string, lower: string[], on: string = this.disk): string {
    const upper = join(on, `${name}-up`);
    const work = join(on, `${name}-wk`);
    const merged = join(this.dir, name);
    for (const d of [upper, work, merged]) mkdirSync(d, { recursive: true });
    // The merged root takes its owner and mode from the upper layer's root: those of the folder it stands for.
    const top = statSync(lower[lower.length - 1]!);
    chownSync(upper, top.uid, top.gid);
    chmodSync(upper, top.mode & 0o7777);
    const options = `lowerdir=${lower.map(checked).join(":")},upperdir=${checked(upper)},workdir=${checked(work)}`;
    run(["mount", "-t", "overlay", "overlay", "-o", options, merged]);
    this.#mounts.push(merged);
    return merged;
  }

  /**
   * A tmpfs of `bytes` for grading's writable layers (`overlay(name, lower, scratch)`): not the agent's disk, so that an
   * agent that fills its disk cannot make its grading fail (an infra error is left out of training, a 0 is not). Its
   * pages are charged to the grader's memory cgroup, the writer's.
   */
  scratch(bytes: number): string {
    const dir = join(this.dir, "scratch");
    mkdirSync(dir, { recursive: true });
    run(["mount", "-t", "tmpfs", "-o", `size=${bytes},mode=0755`, "tmpfs", dir]);
    this.#mounts.push(dir);
    return dir;
  }

  /** The writable layer of an overlay made by `overlay(name)` (the agent's workspace changes, for the grader). */
  upper(name: string): string {
    return join(this.disk, `${name}-up`);
  }

  /** Whether `path` (under an upper) is a real folder: a whiteout or a link there is not a workspace to stack. */
  static isFolder(path: string): boolean {
    try {
      return lstatSync(path).isDirectory();
    } catch {
      return false;
    }
  }

  /** Unmounts one overlay, keeping its writable layer (the agent's workspace, for the grader); never throws. */
  close(name: string): void {
    const merged = join(this.dir, name);
    const i = this.#mounts.indexOf(merged);
    if (i >= 0 && unmount(merged)) this.#mounts.splice(i, 1);
    removeInBackground(join(this.disk, `${name}-wk`));
  }

  /** Unmounts one overlay and drops its layers (the agent's root once it has exited: never graded). */
  drop(name: string): void {
    this.close(name);
    removeInBackground(join(this.disk, `${name}-up`));
  }

  /** Unmounts everything, newest first (the disk last); the files stay for the rollout's folder removal (or --keep). */
  release(): void {
    while (this.#mounts.length) unmount(this.#mounts.pop()!);
  }
}
