// A task's image: its workspace copied once per run (not per rollout), owned by the sandbox's user, its optional
// setup run, and its git history squashed to one commit — an agent cannot read the fix from a later commit. Every
// rollout's workspace is an overlay over it; grading restores test paths from it.
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Sandbox, SANDBOX_HOST_UID, type SandboxLimits } from "./sandbox.ts";
import type { Task } from "./task.ts";

export class ImageError extends Error {
  readonly code = "RLGATE_RUN_IMAGE";
}

export interface TaskImage {
  /** The prepared workspace (read-only for rollouts). */
  dir: string;
  log: string;
  ms: number;
}

export const GIT =
  "git -c user.name=rlgate -c user.email=rlgate@localhost -c init.defaultBranch=main -c commit.gpgsign=false";
export const SQUASH = `rm -rf .git && ${GIT} init -q && ${GIT} add -A && ${GIT} commit -q --allow-empty -m task`;

export async function prepareImage(
  task: Task,
  root: string,
  limits: SandboxLimits,
  signal?: AbortSignal,
): Promise<TaskImage> {
  const started = Date.now();
  const dir = join(root, "image");
  const empty = join(root, "empty");
  mkdirSync(root, { recursive: true });
  mkdirSync(empty, { recursive: true });
  if (task.image || !task.workspace)
    throw new ImageError(`task '${task.name}' runs in the image ${task.image}: use --sandbox podman (or kubernetes)`);
  const copy = spawnSync("cp", ["-a", task.workspace, dir], { encoding: "utf8" });
  if (copy.status !== 0) throw new ImageError(`cannot copy ${task.workspace}: ${copy.stderr}`);
  if (process.getuid?.() === 0) spawnSync("chown", ["-R", `${SANDBOX_HOST_UID}:${SANDBOX_HOST_UID}`, dir, empty]);
  let log = "";
  // The image is the overlay's upper layer over an empty one: what setup and git write lands in it directly.
  const script = `set -e\n${task.setup ? `${task.setup}\n` : ""}${SQUASH}`;
  const box = new Sandbox(
    {
      lower: [empty],
      upper: dir,
      work: join(root, "image-work"),
      mountpoint: join(root, "image-mnt"),
      binds: [],
      env: { HOME: "/tmp", PATH: "/usr/local/bin:/usr/bin:/bin" },
      argv: ["bash", "-c", script],
      limits,
    },
    { timeoutMs: 600_000, signal },
  );
  box.child.stdout!.on("data", (d: Buffer) => (log += d));
  box.child.stderr!.on("data", (d: Buffer) => (log += d));
  const exit = await box.exited;
  if (exit.code !== 0) {
    if (exit.startError) log += exit.startError;
    throw new ImageError(
      `preparing the image of task '${task.name}' failed (${exit.stopped ?? `exit ${exit.code ?? exit.signal}`}): ${log.trim().slice(-2000)}`,
    );
  }
  return { dir, log, ms: Date.now() - started };
}
