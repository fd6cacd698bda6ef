// podman containers' memory and disk limits, from inside: what an agent writes to its in-RAM folders (/tmp, /var/tmp,
// /dev/shm) is held against --memory by the container's memory cgroup, and what it writes to disk anywhere (the
// workspace, its home, the container's own root) stops at --disk with ENOSPC: the rollout's loop-mounted filesystem.
import assert from "node:assert/strict";
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { resolveHarness } from "../runner/harnesses.ts";
import { ensureHostImage } from "../runner/podman-host-image.ts";
import { RUNNER_TAG } from "../runner/podman-runner-id.ts";
import type { RolloutResult } from "../runner/rollout.ts";
import { runTasks, type RunOptions } from "../runner/run.ts";
import { DEFAULT_LIMITS } from "../runner/sandbox.ts";
import { loadTask, type Task } from "../runner/task.ts";
import { ROOT, startStack, tempDir, type Stack } from "./helpers.ts";
import { podmanForTests } from "./require-in-ci.ts";

const unavailable = podmanForTests();
const MiB = 2 ** 20;

describe("podman container limits", { skip: unavailable ? `podman: ${unavailable}` : false }, () => {
  let stack: Stack;
  let task: Task;
  const work = tempDir("podman-limits");

  before(async () => {
    stack = await startStack();
    const image = await ensureHostImage();
    const dir = join(work, "task");
    cpSync(join(ROOT, "examples", "tasks", "fix-add"), dir, { recursive: true });
    // /opt writable by the agent's user: writes to the container's own root, outside workspace and home.
    writeFileSync(
      join(dir, "task.json"),
      JSON.stringify({ setup: "mkdir -p /opt && chmod 777 /opt", verifier: "python3 tests/test_add.py" }),
    );
    task = { ...loadTask(dir), image };
  });
  after(async () => {
    await stack.close();
    rmSync(work, { recursive: true, force: true });
  });

  async function run(harness: string, limits: Partial<RunOptions["limits"]>) {
    const [r] = await runTasks({
      tasks: [task],
      harness: resolveHarness(harness),
      n: 1,
      concurrency: 1,
      timeoutSec: 120,
      gatewayUrl: stack.gateway.url,
      limits: { ...DEFAULT_LIMITS, ...limits },
      workDir: work,
      sandbox: "podman",
    });
    const rollout = (await (await fetch(`${stack.gateway.url}/api/rollouts/${r!.rolloutId}`)).json()) as any;
    return { r: r! as RolloutResult, logs: rollout.metadata.runner.logs as Record<string, string> };
  }

  for (const folder of ["/tmp", "/dev/shm"])
    test(`800 MB written to ${folder} under --memory 256m: stopped by the memory limit, infra_error`, async () => {
      const { r, logs } = await run(`dd if=/dev/zero of=${folder}/big bs=1M count=800; echo dd=$?; sleep 100`, {
        memoryBytes: 256 * MiB,
      });
      assert.equal(r.status, "infra_error", `${r.error}\n${logs.agent}`);
      assert.equal(r.reward, null);
      assert.match(r.error!, /memory limit/);
      assert.equal(r.stage, "agent");
    });

  test("--disk 64m: the workspace, the home and the container's root each stop at the limit (ENOSPC)", async () => {
    const write = (where: string, name: string) =>
      `dd if=/dev/zero of=${where} bs=1M count=200 2>&1 | grep -c 'No space left' | sed 's/^/${name}_full=/'; ` +
      `echo ${name}_mib=$(( $(stat -c %s ${where}) / 1048576 )); rm -f ${where}`;
    const { r, logs } = await run(
      [write("big", "workspace"), write("$HOME/big", "home"), write("/opt/big", "root"), "df -m / | tail -1"].join(
        "; ",
      ),
      { diskBytes: 64 * MiB },
    );
    assert.equal(r.status, "ok", `${r.error}\n${logs.agent}`);
    for (const name of ["workspace", "home", "root"]) {
      assert.match(logs.agent!, new RegExp(`${name}_full=1`), logs.agent);
      const mib = Number(new RegExp(`${name}_mib=(\\d+)`).exec(logs.agent!)?.[1]);
      assert.ok(mib > 0 && mib <= 64, `${name}: ${mib} MiB written under a 64 MiB limit\n${logs.agent}`);
    }
    // The rollout's graded as usual afterwards (the bug is not fixed: reward 0, not an infra error).
    assert.equal(r.reward, 0);
  });

  test("an agent that fills its disk is graded all the same: the grader writes elsewhere (reward 1, not infra_error)", async () => {
    const { r, logs } = await run(
      "sed -i 's/a - b/a + b/' calc.py; dd if=/dev/zero of=fill bs=1M count=200 2>&1 | grep -c 'No space left'",
      { diskBytes: 64 * MiB },
    );
    assert.match(logs.agent!, /^1$/m, logs.agent);
    assert.equal(r.status, "ok", `${r.error}\n${logs.grade}`);
    assert.equal(r.reward, 1, logs.grade);
  });

  test("no mount of this runner's rollouts is left behind", () => {
    const left = readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .filter((l) => l.includes(`/pm.${RUNNER_TAG}/`));
    assert.deepEqual(left, []);
  });
});
