// bwrap sandboxes' memory and disk limits, from inside: what an agent holds in its in-RAM folders counts as its
// memory, and what it writes to disk stops at --disk (ENOSPC as root, where the rollout has a filesystem of its own;
// the watchdog otherwise, tested here on its own whoever runs the tests).
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { markRunFolder, reapDeadRunnerDisks } from "../runner/disk-reap.ts";
import { resolveHarness } from "../runner/harnesses.ts";
import type { RolloutResult } from "../runner/rollout.ts";
import { runTasks, type RunOptions } from "../runner/run.ts";
import { DEFAULT_LIMITS, ownForSandbox, Sandbox } from "../runner/sandbox.ts";
import { rolloutDisk } from "../runner/sandbox-disk.ts";
import { loadTask, type Task } from "../runner/task.ts";
import { ROOT, startStack, tempDir, type Stack } from "./helpers.ts";
import { bwrapForTests } from "./require-in-ci.ts";

const scratch = tempDir("limits-probe");
const unavailable = bwrapForTests(scratch);
rmSync(scratch, { recursive: true, force: true });
const MiB = 2 ** 20;
const ROOTED = process.getuid?.() === 0;

describe(
  "bwrap sandbox limits",
  { skip: unavailable ? `bwrap sandboxes cannot start here: ${unavailable}` : false },
  () => {
    let stack: Stack;
    let work: string;
    let task: Task;
    before(async () => {
      stack = await startStack();
      work = tempDir("limits-work");
      chmodSync(work, 0o755);
      task = loadTask(join(ROOT, "examples", "tasks", "fix-add"));
    });
    after(async () => {
      await stack.close();
      rmSync(work, { recursive: true, force: true });
    });

    async function run(harness: string, limits: Partial<RunOptions["limits"]>): Promise<RolloutResult> {
      const [r] = await runTasks({
        tasks: [task],
        harness: resolveHarness(harness),
        n: 1,
        concurrency: 1,
        timeoutSec: 120,
        gatewayUrl: stack.gateway.url,
        limits: { ...DEFAULT_LIMITS, ...limits },
        workDir: work,
      });
      return r!;
    }

    async function agentLog(r: RolloutResult): Promise<string> {
      const rollout = (await (await fetch(`${stack.gateway.url}/api/rollouts/${r.rolloutId}`)).json()) as any;
      return rollout.metadata.runner.logs.agent;
    }

    test("files in /tmp and /dev/shm count as memory: each under the limit, together over it, the sandbox is stopped", async () => {
      // 150 MiB in each in-RAM folder, 300 together, with --memory 256m; the processes themselves hold a few MiB.
      const hold =
        "dd if=/dev/zero of=/tmp/a bs=1M count=150 2>/dev/null && dd if=/dev/zero of=/dev/shm/b bs=1M count=150 2>/dev/null && echo held; sleep 100";
      const r = await run(hold, { memoryBytes: 256 * MiB });
      assert.equal(r.status, "infra_error", r.error ?? "");
      assert.match(r.error!, /in-RAM files \(\/tmp, \/dev\/shm\) held more than the memory limit/);
    });

    test("each in-RAM folder is a tmpfs the size of the memory limit, SysV shared memory is bounded by it, and bwrap's own root and /dev are read-only", async () => {
      const probe = [
        "df -B1 --output=size /tmp /dev/shm | tail -n +2 | tr -d ' '",
        "touch /planted 2>&1 | grep -o 'Read-only file system'",
        "touch /dev/planted 2>&1 | grep -o 'Read-only file system'",
        "echo ok > /dev/null && echo dev-null-writable",
        // SysV shared memory (held by no process, in no file system the watchdog reads) is bounded by the limit.
        `python3 -c 'import ctypes; libc = ctypes.CDLL(None); get = lambda mib: libc.shmget(0, ctypes.c_size_t(mib << 20), 0o1600) >= 0; print("sysv", get(100), get(32))'`,
      ].join("; ");
      const r = await run(probe, { memoryBytes: 64 * MiB });
      assert.equal(r.status, "ok", r.error ?? "");
      assert.equal(
        await agentLog(r),
        `${64 * MiB}\n${64 * MiB}\nRead-only file system\nRead-only file system\ndev-null-writable\nsysv False True\n`,
      );
    });

    test(
      "--disk as root: writes past it fail with ENOSPC in the workspace and in HOME, the rollout goes on and is graded",
      { skip: !ROOTED && "a rollout's filesystem of its own needs root (the watchdog has its own test)" },
      async () => {
        const fill = [
          "sed -i 's/a - b/a + b/' calc.py",
          "dd if=/dev/zero of=big bs=1M count=100 2>&1 | grep -o 'No space left on device' | head -1",
          "dd if=/dev/zero of=\"$HOME/big\" bs=1M count=100 2>&1 | grep -o 'No space left on device' | head -1",
          "rm -f big",
        ].join("; ");
        const r = await run(fill, { diskBytes: 64 * MiB });
        assert.equal(r.status, "ok", r.error ?? "");
        assert.equal(r.reward, 1, "graded as usual");
        assert.equal(await agentLog(r), "No space left on device\nNo space left on device\n");
      },
    );

    test("the disk watchdog (--disk where rlgate is not root) stops a sandbox whose files outgrow its limit", async () => {
      // The method a runner without root gets, run here whoever runs the test: the same Sandbox, measured by du.
      const dir = join(work, "watched");
      const lower = join(dir, "lower");
      mkdirSync(lower, { recursive: true });
      chmodSync(dir, 0o755);
      ownForSandbox(lower);
      const upper = join(dir, "upper");
      const box = new Sandbox(
        {
          lower: [lower],
          upper,
          work: join(dir, "work"),
          mountpoint: join(dir, "mnt"),
          binds: [],
          env: { PATH: "/usr/bin:/bin" },
          argv: ["bash", "-c", "dd if=/dev/zero of=/workspace/big bs=1M count=100 2>/dev/null; sleep 100"],
          limits: DEFAULT_LIMITS,
          diskWatch: { dirs: [upper], bytes: 64 * MiB },
        },
        { timeoutMs: 120_000 },
      );
      const exit = await box.exited;
      assert.equal(exit.stopped, "disk");
      rmSync(dir, { recursive: true, force: true });
    });

    test(
      "as root, a runner releases the rollout disks a dead runner left mounted, never a live runner's",
      { skip: !ROOTED && "loop mounts need root" },
      () => {
        const dead = join(work, "rlgate-run-dead");
        const live = join(work, "rlgate-run-live");
        for (const dir of [dead, live]) mkdirSync(join(dir, "r0"), { recursive: true });
        // This process's pid with another start time: a dead runner whose pid was given to a new process.
        writeFileSync(join(dead, "runner"), `${process.pid}.0\n`);
        markRunFolder(live);
        const disks = [dead, live].map((dir) => rolloutDisk(join(dir, "r0"), 16 * MiB, { kind: "loop" }));
        const reaped = reapDeadRunnerDisks();
        assert.ok(reaped.includes(disks[0]!.dir), reaped.join(", "));
        assert.ok(!reaped.includes(disks[1]!.dir), "a live runner's disk stays");
        const mounted = readFileSync("/proc/self/mountinfo", "utf8");
        assert.ok(!mounted.includes(` ${disks[0]!.dir} `));
        assert.ok(mounted.includes(` ${disks[1]!.dir} `));
        assert.equal(disks[1]!.release(), null);
        for (const dir of [dead, live]) rmSync(dir, { recursive: true, force: true });
      },
    );
  },
);
