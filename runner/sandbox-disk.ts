// A bwrap rollout's disk quota (`--disk`): what its agent writes — the workspace's upper layer and its home — lives in
// a folder of a size-limited filesystem, so that an agent cannot fill the host's disk.
//
//   loop   (rlgate runs as root): a sparse file of that size holding an ext4 without journal, loop-mounted on the
//          folder. A hard limit: past it, writes fail with ENOSPC inside the sandbox and the rollout goes on. ~40 ms
//          a rollout (mkfs, mount, unmount); blocks are allocated only as they are written.
//   watch  (otherwise: an unprivileged user can neither loop-mount nor set quotas): the folder is on the host's disk
//          and the sandbox's watchdog measures it (du) every few seconds, stopping the sandbox past the limit.
//
// The grader's own writes go to a tmpfs of the same size mounted in its namespace (runner/sandbox.ts `scratch`).
import { spawnSync } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ownForSandbox, SANDBOX_HOST_UID } from "./sandbox.ts";

export type DiskMethod = { kind: "loop" } | { kind: "watch"; why: string };

export const DEFAULT_DISK_BYTES = 2 * 1024 ** 3;

const MKFS = ["mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard"];

function run(cmd: string, args: string[]): string | null {
  const r = spawnSync(cmd, args, { encoding: "utf8", timeout: 60_000 });
  if (r.status === 0) return null;
  return `${cmd} ${args.join(" ")}: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}`;
}

/** How quotas can be set here: tried once per run, on a small image in `scratch` (removed). */
export function diskMethod(scratch: string): DiskMethod {
  if (process.getuid?.() !== 0)
    return { kind: "watch", why: "rlgate is not root (loop mounts need it): the watchdog measures each rollout" };
  mkdirSync(scratch, { recursive: true });
  const disk = makeLoopDisk(scratch, 16 * 1024 ** 2);
  if (typeof disk === "string") {
    rmSync(scratch, { recursive: true, force: true });
    return { kind: "watch", why: `no loop-mounted filesystem here (${disk}): the watchdog measures each rollout` };
  }
  disk.release();
  rmSync(scratch, { recursive: true, force: true });
  return { kind: "loop" };
}

export interface RolloutDisk {
  /** The folder under the quota: the agent's upper layer, overlay work folder and home go in it. */
  dir: string;
  kind: DiskMethod["kind"];
  bytes: number;
  /** Unmounts (the image file stays in the rollout's folder until that is removed). Null, or what went wrong. */
  release(): string | null;
}

function makeLoopDisk(parent: string, bytes: number): RolloutDisk | string {
  const image = join(parent, "disk.img");
  const dir = join(parent, "disk");
  mkdirSync(dir, { recursive: true });
  const id = `${SANDBOX_HOST_UID}:${SANDBOX_HOST_UID}`;
  const failed =
    run("truncate", ["-s", String(bytes), image]) ??
    run(MKFS[0]!, [...MKFS.slice(1), "-E", `root_owner=${id}`, image]) ??
    run("mount", ["-o", "loop,nosuid,nodev", image, dir]);
  if (failed) return failed;
  return { dir, kind: "loop", bytes, release: () => run("umount", [dir]) };
}

/** The quota folder of a rollout under `parent`, by the run's method. */
export function rolloutDisk(parent: string, bytes: number, method: DiskMethod): RolloutDisk {
  if (method.kind === "loop") {
    const disk = makeLoopDisk(parent, bytes);
    if (typeof disk === "string") throw new Error(`the rollout's disk (--disk) could not be made: ${disk}`);
    return disk;
  }
  const dir = join(parent, "disk");
  mkdirSync(dir, { recursive: true });
  ownForSandbox(dir);
  return { dir, kind: "watch", bytes, release: () => null };
}
