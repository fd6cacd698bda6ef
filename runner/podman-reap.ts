// What a dead runner left: its containers (each stops by its own --timeout, but a runner killed before starting a
// long rollout would leave one for that long) and the mounts of its rollouts (overlays, loop-mounted disks), which
// nothing else releases. A runner reaps them before its first container: by label for containers, by the pm.<runner>
// folder in the mount's path for mounts, only where that runner is gone (its pid is not running with its start time).
import { podman } from "./podman.ts";
import { RUNNER_LABEL, runnerAlive } from "./podman-runner-id.ts";
import { unmount } from "./podman-storage.ts";
import { readFileSync } from "node:fs";

export interface Reaped {
  containers: string[];
  mounts: string[];
}

/** Mount points (as /proc/self/mountinfo spells them: octal escapes decoded) under pm.<tag> folders. */
function runnerMounts(): { path: string; tag: string }[] {
  const out: { path: string; tag: string }[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const path = line.split(" ")[4]?.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    const tag = path && /\/pm\.(\d+\.\d+)(?:\/|$)/.exec(path)?.[1];
    if (path && tag) out.push({ path, tag });
  }
  return out;
}

/** Removes the containers and releases the mounts of runners that are no longer running; never throws. */
export function reapDeadRunners(): Reaped {
  const reaped: Reaped = { containers: [], mounts: [] };
  const listed = podman([
    "ps",
    "--all",
    "--filter",
    `label=${RUNNER_LABEL}`,
    "--format",
    `{{.Names}} {{index .Labels "${RUNNER_LABEL}"}}`,
  ]);
  for (const line of listed.stdout.trim().split("\n")) {
    const [name, tag] = line.split(" ");
    if (name && tag && !runnerAlive(tag)) reaped.containers.push(name);
  }
  if (reaped.containers.length)
    podman(["rm", "--force", "--time", "0", "--ignore", ...reaped.containers], { timeoutMs: 120_000 });
  // Deepest first: overlays before the disk their layers are on.
  const dead = runnerMounts()
    .filter((m) => !runnerAlive(m.tag))
    .sort((a, b) => b.path.length - a.path.length);
  for (const m of dead) if (unmount(m.path)) reaped.mounts.push(m.path);
  return reaped;
}

let reapedOnce = false;
/** reapDeadRunners once per process, before its first container. */
export function reapOnce(): void {
  if (reapedOnce) return;
  reapedOnce = true;
  reapDeadRunners();
}
