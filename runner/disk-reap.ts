// What a dead `rlgate run` left mounted: the loop-mounted filesystems of its bwrap rollouts (runner/sandbox-disk.ts),
// which nothing else releases once the runner is gone (a SIGKILL, a crash). A runner that makes such filesystems first
// releases those of runners that no longer run: a run's folder names its runner (pid and start time) in a file, so that
// a live runner's mounts, or a new process that was given a dead runner's pid, are told apart. Folders stay (with
// --keep they were asked for; otherwise they are the temporary folder's, as a dead runner's other files are).
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { RUNNER_TAG, runnerAlive } from "./podman-runner-id.ts";

const MARKER = "runner";
/** A rollout's disk: RUN/rDIGITS/disk, where RUN is a run's folder (runner/run.ts). */
const ROLLOUT_DISK = /\/rlgate-run-[^/]+\/r\d+\/disk$/;

/** Names this process as the runner of a run's folder. */
export function markRunFolder(root: string): void {
  writeFileSync(join(root, MARKER), `${RUNNER_TAG}\n`);
}

/** Unmounts the rollout disks of runners that no longer run; returns their mount points. Never throws. */
export function reapDeadRunnerDisks(): string[] {
  let mountinfo = "";
  try {
    mountinfo = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return [];
  }
  const reaped: string[] = [];
  for (const line of mountinfo.split("\n")) {
    // Field 5 is the mount point, with blanks and backslashes as octal escapes.
    const path = line.split(" ")[4]?.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    if (!path || !ROLLOUT_DISK.test(path)) continue;
    let tag: string;
    try {
      tag = readFileSync(join(dirname(dirname(path)), MARKER), "utf8").trim();
    } catch {
      continue;
    }
    if (runnerAlive(tag)) continue;
    if (spawnSync("umount", [path]).status === 0) reaped.push(path);
  }
  return reaped;
}
