// podman containers outlive no runner: each carries its own time limit (conmon's --timeout) and is removed when it
// exits (--rm), and a runner that starts removes the containers and releases the mounts of runners that are dead.
// A runner is a child process here (test/podman-runner-child.ts), SIGKILLed in the middle of its rollout's agent stage.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { containerArgs, podman } from "../runner/podman.ts";
import { reapDeadRunners } from "../runner/podman-reap.ts";
import { RUNNER_LABEL, RUNNER_TAG, runnerAlive, startTimeOf } from "../runner/podman-runner-id.ts";
import { DEFAULT_LIMITS } from "../runner/sandbox.ts";
import { resolveHarness } from "../runner/harnesses.ts";
import { ensureHostImage } from "../runner/podman-host-image.ts";
import { runTasks } from "../runner/run.ts";
import { loadTask } from "../runner/task.ts";
import { ROOT, startStack, tempDir, until, type Stack } from "./helpers.ts";
import { podmanForTests } from "./require-in-ci.ts";

const unavailable = podmanForTests();

/** Names of the containers a runner made (by its label), running or not. */
function containersOf(tag: string): string[] {
  const r = podman(["ps", "--all", "--filter", `label=${RUNNER_LABEL}=${tag}`, "--format", "{{.Names}}"]);
  return r.stdout.split("\n").filter(Boolean);
}

/** Mount points under a runner's pm.<tag> folders. */
function mountsOf(tag: string): string[] {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[4] ?? "")
    .filter((p) => p.includes(`/pm.${tag}/`));
}

test("every container carries its own time limit, is removed when it exits, and names its runner", () => {
  const args = containerArgs({
    name: "c",
    image: "i",
    timeoutSec: 70.2,
    user: "1000:1000",
    workdir: "/w",
    mounts: [],
    env: {},
    argv: ["true"],
    limits: DEFAULT_LIMITS,
  });
  const after = (flag: string) => args[args.indexOf(flag) + 1];
  assert.ok(args.includes("--rm"));
  assert.equal(after("--timeout"), "71");
  assert.equal(after("--label"), `${RUNNER_LABEL}=${RUNNER_TAG}`);
  assert.ok(runnerAlive(RUNNER_TAG), "this process is a live runner");
  assert.equal(runnerAlive(`${process.pid}.${Number(startTimeOf(process.pid)) + 1}`), false, "a reused pid is not");
});

describe("a runner SIGKILLed mid-rollout", { skip: unavailable ? `podman: ${unavailable}` : false }, () => {
  let stack: Stack;
  const work = tempDir("podman-lifecycle");

  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.close();
    rmSync(work, { recursive: true, force: true });
  });

  /** Starts a runner whose harness sleeps past `timeoutSec`, waits until its container runs, and SIGKILLs it. */
  async function killRunnerMidRollout(timeoutSec: number): Promise<string> {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "test/podman-runner-child.ts", stack.gateway.url, String(timeoutSec), work],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    const exited = new Promise((resolve) => child.once("exit", resolve));
    const tag = `${child.pid}.${await until(() => startTimeOf(child.pid!) ?? undefined, 10_000, "the runner's start")}`;
    await until(() => (containersOf(tag).length ? true : undefined), 120_000, `the runner's container (${output})`);
    // A live runner's container and mounts are not another runner's to reap.
    const early = reapDeadRunners();
    assert.deepEqual(
      early.containers.filter((n) => containersOf(tag).includes(n)),
      [],
    );
    assert.ok(mountsOf(tag).length > 0, "the rollout's root, workspace and disk are mounted");
    child.kill("SIGKILL");
    await exited;
    return tag;
  }

  test("its container stops by its own time limit and is removed, with no runner left to do it", async () => {
    const tag = await killRunnerMidRollout(2);
    // The runner is gone; the container's own limit is the harness's plus a margin (~12 s here).
    await until(() => (containersOf(tag).length === 0 ? true : undefined), 120_000, "the container to stop");
    // Its mounts stay until a runner starts and reaps them.
    assert.ok(mountsOf(tag).length > 0);
    const reaped = reapDeadRunners();
    assert.ok(reaped.mounts.length > 0, JSON.stringify(reaped));
    assert.deepEqual(mountsOf(tag), []);
  });

  test("a runner that starts removes a dead runner's running container and releases its mounts", async () => {
    const tag = await killRunnerMidRollout(600);
    assert.equal(containersOf(tag).length, 1, "the container runs on without its runner");
    // This process starts its first rollout: a runner starting (the reaping runs before its first container).
    const [r] = await runTasks({
      tasks: [{ ...loadTask(join(ROOT, "examples", "tasks", "fix-add")), image: await ensureHostImage() }],
      harness: resolveHarness("sed -i 's/a - b/a + b/' calc.py"),
      n: 1,
      concurrency: 1,
      timeoutSec: 60,
      gatewayUrl: stack.gateway.url,
      limits: DEFAULT_LIMITS,
      workDir: work,
      sandbox: "podman",
    });
    assert.equal(r!.reward, 1, r!.error ?? "");
    assert.deepEqual(containersOf(tag), []);
    assert.deepEqual(mountsOf(tag), []);
  });
});
