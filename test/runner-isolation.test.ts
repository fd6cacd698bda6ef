// `rlgate run`'s sandboxes, probed from inside: template harnesses that try to get out, to read what they should
// not, to tamper with grading, or to exhaust the machine; what each saw is read back from the rollout's metadata.
// The same probes run against both backends: bubblewrap over folder tasks, podman over the same task as an image
// (FROM a base image built from this machine's own Debian packages, runner/podman-host-image.ts).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { resolveHarness } from "../runner/harnesses.ts";
import type { RolloutResult } from "../runner/rollout.ts";
import { podman } from "../runner/podman.ts";
import { ensureHostImage } from "../runner/podman-host-image.ts";
import { runTasks, type RunOptions, type SandboxKind } from "../runner/run.ts";
import { DEFAULT_LIMITS } from "../runner/sandbox.ts";
import { loadTask, type Task } from "../runner/task.ts";
import { ROOT, startStack, tempDir, type Stack } from "./helpers.ts";
import { bwrapForTests, podmanForTests } from "./require-in-ci.ts";

const scratch = tempDir("runner-probe");
const BACKENDS: { kind: SandboxKind; unavailable: string | null }[] = [
  { kind: "bwrap", unavailable: bwrapForTests(scratch) },
  { kind: "podman", unavailable: podmanForTests() },
];
rmSync(scratch, { recursive: true, force: true });
const EXAMPLE = join(ROOT, "examples", "tasks", "fix-add");

for (const { kind, unavailable } of BACKENDS)
  describe(
    `rlgate run sandboxes: ${kind}`,
    { skip: unavailable ? `${kind} sandboxes cannot start here: ${unavailable}` : false },
    () => {
      let stack: Stack;
      let work: string;
      let task: Task;
      let image: string | null = null;
      /** Every rollout of the suite, to check that none left a container or an image behind. */
      const rollouts: string[] = [];
      const runAll = async (o: RunOptions): Promise<RolloutResult[]> => {
        const results = await runTasks(o);
        rollouts.push(...results.map((r) => r.rolloutId ?? ""));
        return results;
      };
      /** The task folder as this backend runs it: as it is (bwrap), or as an image task over the base image (podman). */
      const asTask = (dir: string): Task => (image ? { ...loadTask(dir), image } : loadTask(dir));

      before(async () => {
        stack = await startStack();
        work = tempDir("runner-work");
        // The runner's folders must be reachable by the sandbox's user.
        chmodSync(work, 0o755);
        if (kind === "podman") image = await ensureHostImage();
        task = asTask(EXAMPLE);
      });
      after(async () => {
        await stack.close();
        rmSync(work, { recursive: true, force: true });
      });

      async function run(harness: string, extra: Partial<RunOptions> = {}): Promise<RolloutResult[]> {
        return runAll({
          tasks: [task],
          harness: resolveHarness(harness),
          n: 1,
          concurrency: 1,
          timeoutSec: 60,
          gatewayUrl: stack.gateway.url,
          limits: DEFAULT_LIMITS,
          workDir: work,
          sandbox: kind,
          ...extra,
        });
      }

      async function metadata(id: string): Promise<any> {
        return ((await (await fetch(`${stack.gateway.url}/api/rollouts/${id}`)).json()) as any).metadata;
      }

      test(
        "a work folder the sandboxes' user cannot reach is refused with what to do",
        {
          skip:
            (kind !== "bwrap" && "bwrap only: containers do not walk the runner's folders") ||
            (process.getuid?.() !== 0 && "only as root"),
        },
        async () => {
          const closed = tempDir("runner-closed");
          await assert.rejects(
            run("echo unreachable", { workDir: closed }),
            /not searchable by the sandboxes' user .*the work folder .*chmod o\+x/,
          );
          rmSync(closed, { recursive: true, force: true });
        },
      );

      test(
        "a tools folder the sandboxes' user cannot reach (rlgate installed under a private folder) is refused with what to do",
        {
          skip:
            (kind !== "bwrap" && "bwrap only: containers do not walk the runner's folders") ||
            (process.getuid?.() !== 0 && "only as root"),
        },
        async () => {
          const closed = tempDir("runner-closed-tools"); // mode 0700, as mktemp -d makes it
          mkdirSync(join(closed, "cli", "bin"), { recursive: true });
          await assert.rejects(
            run("echo unreachable", { mountReadOnly: [join(closed, "cli")] }),
            new RegExp(`${closed} is not searchable by the sandboxes' user .*tools folder .*chmod o\\+x`),
          );
          rmSync(closed, { recursive: true, force: true });
        },
      );

      test("the network: the gateway answers through the bridge, the control API is refused, nothing else is reachable", async () => {
        const probe = [
          `echo gateway=$(curl -s -o /dev/null -w '%{http_code}' "$OPENAI_BASE_URL/chat/completions" -H 'content-type: application/json' -d '{"model":"Qwen/Qwen3-8B","messages":[{"role":"user","content":"hi"}]}')`,
          `echo control=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8700/api/rollouts)`,
          `echo other_rollout=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8700/r/someone-else/v1/models)`,
          // The gateway's own port on the host's loopback, a public address, a private one: no route, no listener.
          `for t in 127.0.0.1/${new URL(stack.gateway.url).port} 1.1.1.1/80 10.0.0.1/80 192.168.1.1/80; do timeout 5 bash -c "echo > /dev/tcp/$t" 2>/dev/null && echo "reached $t" || echo "refused $t"; done`,
          "echo interfaces=$(ls /sys/class/net 2>/dev/null | tr '\\n' ' ')",
        ].join("; ");
        const [r] = await run(probe);
        assert.equal(r!.status, "ok", r!.error ?? "");
        const log: string = (await metadata(r!.rolloutId!)).runner.logs.agent;
        assert.match(log, /gateway=200/, log);
        assert.match(log, /control=403/, log);
        assert.match(log, /other_rollout=403/, log);
        assert.doesNotMatch(log, /reached/, log);
        assert.equal(log.match(/refused/g)?.length, 4, log);
        assert.equal(r!.calls, 1, "the one call through the bridge is the rollout's");
      });

      test(
        "with a control token on the gateway, the bridge authenticates the harness's calls with the rollout's key",
        // The bridge is the runner's, the same for both backends (the network test shows podman reaches it): once.
        { skip: kind !== "bwrap" && "the bridge is the same code for every backend: tested once, with bwrap" },
        async () => {
          const guarded = await startStack({ gateway: { controlToken: "secret-token" } });
          try {
            const call = `curl -s -o /dev/null -w 'gateway=%{http_code}\\n' "$OPENAI_BASE_URL/chat/completions" -H 'content-type: application/json' -d '{"model":"Qwen/Qwen3-8B","messages":[{"role":"user","content":"hi"}]}'`;
            const [r] = await run(call, { gatewayUrl: guarded.gateway.url, token: "secret-token" });
            assert.equal(r!.status, "ok", r!.error ?? "");
            assert.equal(r!.calls, 1);
            await assert.rejects(
              run(call, { gatewayUrl: guarded.gateway.url }),
              /GET \/api\/rollouts\?limit=1: 401 the control API needs 'Authorization: Bearer <token>'/,
              "without --token the run stops before any rollout, saying why",
            );
          } finally {
            await guarded.close();
          }
        },
      );

      test("a --mount-ro folder is visible read-only at its own path, its bin/ on PATH", async () => {
        const tools = join(work, "tools");
        mkdirSync(join(tools, "bin"), { recursive: true });
        writeFileSync(
          join(tools, "bin", "my-agent"),
          "#!/bin/sh\necho my-agent ran; touch $0.written 2>/dev/null && echo wrote || echo read-only\n",
          { mode: 0o755 },
        );
        chmodSync(tools, 0o755);
        const [r] = await run("my-agent {prompt}", { mountReadOnly: [tools] });
        assert.equal(r!.status, "ok", r!.error ?? "");
        assert.match((await metadata(r!.rolloutId!)).runner.logs.agent, /my-agent ran\nread-only/);
      });

      test("hidden tests, the task folder and other rollouts' folders are not visible during the agent stage", async () => {
        const probe = [
          `ls ${task.dir}/tests/test_add.py >/dev/null 2>&1 && echo saw-hidden || echo no-hidden`,
          `ls tests/test_add.py >/dev/null 2>&1 && echo saw-hidden-in-workspace || echo no-hidden-in-workspace`,
          `ls ${work} >/dev/null 2>&1 && echo saw-work || echo no-work`,
          `ls /rlgate >/dev/null 2>&1 && echo saw-grader || echo no-grader`,
          "echo $RLGATE_SAMPLE > mine.txt",
          "sleep 1",
          "echo files=$(ls | tr '\\n' ' ')",
        ].join("; ");
        const results = await run(probe, { n: 2, concurrency: 2, generation: "7" });
        for (const r of results) {
          const rollout = (await (await fetch(`${stack.gateway.url}/api/rollouts/${r.rolloutId}`)).json()) as any;
          assert.equal(rollout.group, "fix-add@7", "one group per task and generation");
          assert.deepEqual(
            [rollout.metadata.group_size, rollout.metadata.sample, rollout.metadata.generation],
            [2, r.sample, "7"],
          );
          const log: string = rollout.metadata.runner.logs.agent;
          for (const word of ["no-hidden", "no-hidden-in-workspace", "no-work", "no-grader"])
            assert.match(log, new RegExp(`^${word}$`, "m"), log);
          // Both ran at once, each in its own overlay: only its own marker file.
          assert.match(log, /files=calc\.py mine\.txt tests/, log);
        }
      });

      test("the workspace is a one-commit git repository after setup: earlier history and future commits are gone", async () => {
        const dir = join(work, "task-with-history");
        cpSync(EXAMPLE, dir, { recursive: true });
        const git = (...args: string[]) =>
          spawnSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], {
            cwd: join(dir, "workspace"),
            encoding: "utf8",
          });
        git("init", "-q");
        git("add", "-A");
        git("commit", "-qm", "first");
        writeFileSync(join(dir, "workspace", "answer.txt"), "the fix: a + b\n");
        git("add", "-A");
        git("commit", "-qm", "the answer");
        git("rm", "-q", "answer.txt");
        git("commit", "-qm", "hide it again");
        writeFileSync(join(dir, "task.json"), JSON.stringify({ verifier: "true", setup: "echo built > build.txt" }));
        const [r] = await runAll({
          tasks: [asTask(dir)],
          harness: resolveHarness(
            "echo commits=$(git log --oneline | wc -l); git log --all -p | grep -c 'the fix' || true; git status --short | wc -l; cat build.txt",
          ),
          n: 1,
          concurrency: 1,
          timeoutSec: 60,
          gatewayUrl: stack.gateway.url,
          limits: DEFAULT_LIMITS,
          workDir: work,
          sandbox: kind,
        });
        const log: string = (await metadata(r!.rolloutId!)).runner.logs.agent;
        // The setup's output is part of the image and of its one commit (a clean status).
        assert.match(log, /commits=1\n0\n0\nbuilt\n/, log);
      });

      test("grading: edits to test files are reverted and the hidden tests decide, whatever the agent left in tests/", async () => {
        const tamper = [
          "echo 'print(\"ok\")' > tests/test_add.py",
          "echo 'raise SystemExit(1)' > tests/test_smoke.py",
          "mkdir -p tests/sub && echo junk > tests/sub/x",
        ].join("; ");
        const [cheat] = await run(tamper);
        assert.equal(cheat!.status, "ok");
        assert.equal(cheat!.reward, 0, "a replaced test file does not make a pass");
        const fix =
          "sed -i 's/a - b/a + b/' calc.py; rm -rf tests; echo 'not a folder' > tests; mkdir -p locked/x; chmod 000 locked";
        const [fixed] = await run(fix);
        assert.equal(fixed!.reward, 1, "the fix passes even with tests/ destroyed: it is restored before the verifier");
        const grade: string = (await metadata(fixed!.rolloutId!)).runner.logs.grade;
        assert.match(grade, /add: ok/);
      });

      // Under podman each grader reads the pristine image: a per-container image mount of it was unmounted by one
      // grader's cleanup while another's started ("runc create failed ... no such file or directory", 5 of 36 here).
      test("graders of one task run side by side, starting while others are removed: every rollout is graded", async () => {
        const results = await run("sed -i 's/a - b/a + b/' calc.py", { n: 12, concurrency: 4 });
        assert.equal(results.length, 12);
        for (const r of results) {
          const logs = (await metadata(r.rolloutId!)).runner.logs;
          assert.equal(r.status, "ok", `${r.error}\n${logs.grade}`);
          assert.equal(r.reward, 1, logs.grade);
        }
      });

      test("the verifier runs without the agent's processes and without network", async () => {
        const dir = join(work, "task-verifier-probe");
        cpSync(EXAMPLE, dir, { recursive: true });
        writeFileSync(
          join(dir, "task.json"),
          JSON.stringify({
            verifier:
              "pgrep -x sleep && exit 3; timeout 5 bash -c 'echo > /dev/tcp/1.1.1.1/80' 2>/dev/null && exit 4; [ -S /run/rlgate/gateway.sock ] && exit 5; python3 tests/test_add.py",
          }),
        );
        const [r] = await runAll({
          tasks: [asTask(dir)],
          harness: resolveHarness("sed -i 's/a - b/a + b/' calc.py; (sleep 300 &) ; setsid sleep 300 & echo started"),
          n: 1,
          concurrency: 1,
          timeoutSec: 60,
          gatewayUrl: stack.gateway.url,
          limits: DEFAULT_LIMITS,
          workDir: work,
          sandbox: kind,
        });
        assert.equal(r!.status, "ok", r!.error ?? "");
        assert.equal(r!.reward, 1, (await metadata(r!.rolloutId!)).runner.logs.grade);
      });

      test("a harness past its time limit finishes as timeout with reward 0", async () => {
        const [r] = await run("sleep 120", { timeoutSec: 2 });
        assert.equal(r!.status, "timeout");
        assert.equal(r!.reward, 0);
        assert.equal((await metadata(r!.rolloutId!)).runner.stage, "agent");
      });

      test("a fork bomb is stopped by the process limit and finishes as infra_error; the runner goes on", async () => {
        const [r] = await run(":(){ :|:& };:; sleep 60", { limits: { ...DEFAULT_LIMITS, processes: 64 } });
        assert.equal(r!.status, "infra_error");
        assert.equal(r!.reward, null);
        assert.match(r!.error!, /process limit/);
        const meta = await metadata(r!.rolloutId!);
        assert.equal(meta.runner.stage, "agent");
        const [after] = await run("sed -i 's/a - b/a + b/' calc.py");
        assert.equal(after!.reward, 1, "the next rollout runs normally");
      });

      test("a memory hog is stopped by the memory limit and finishes as infra_error", async () => {
        // Four processes of ~120 MiB each: every one under the per-process data limit, together over the sandbox's.
        const hog = `for i in 1 2 3 4; do python3 -c 'import time; b = bytearray(120 * 2**20); b[::4096] = b"x" * len(b[::4096]); time.sleep(60)' & done; wait`;
        const [r] = await run(hog, { limits: { ...DEFAULT_LIMITS, memoryBytes: 256 * 2 ** 20 } });
        assert.equal(r!.status, "infra_error");
        assert.match(r!.error!, /memory limit/);
        // One process past the data limit is refused its memory by the kernel: the command fails, the rollout goes on.
        const [single] = await run(
          `python3 -c 'b = bytearray(512 * 2**20)' 2>&1 | tail -1; echo exit=\${PIPESTATUS[0]}`,
          {
            limits: { ...DEFAULT_LIMITS, memoryBytes: 256 * 2 ** 20 },
          },
        );
        assert.equal(single!.status, "ok", single!.error ?? "");
        assert.match((await metadata(single!.rolloutId!)).runner.logs.agent, /MemoryError\nexit=1/);
      });

      test("a task whose setup fails: its rollouts finish as infra_error in the prepare stage, with the setup's output", async () => {
        const dir = join(work, "task-bad-setup");
        cpSync(EXAMPLE, dir, { recursive: true });
        writeFileSync(
          join(dir, "task.json"),
          JSON.stringify({ verifier: "true", setup: "echo compiling; echo 'missing dependency' >&2; exit 3" }),
        );
        const results = await runAll({
          tasks: [asTask(dir), task],
          harness: resolveHarness("sed -i 's/a - b/a + b/' calc.py"),
          n: 2,
          concurrency: 2,
          gatewayUrl: stack.gateway.url,
          limits: DEFAULT_LIMITS,
          workDir: work,
          sandbox: kind,
        });
        assert.deepEqual(
          results.map((r) => [r.task, r.status, r.reward, r.stage]),
          [
            ["task-bad-setup", "infra_error", null, "prepare"],
            ["task-bad-setup", "infra_error", null, "prepare"],
            ["fix-add", "ok", 1, "done"],
            ["fix-add", "ok", 1, "done"],
          ],
        );
        assert.match(
          results[0]!.error!,
          /preparing the image of task 'task-bad-setup' failed \(exit 3\): compiling\nmissing dependency/,
        );
        assert.equal((await metadata(results[0]!.rolloutId!)).runner.stage, "prepare");
      });

      test("a harness that cannot start is an infra_error, with the reason kept on the rollout", async () => {
        const [r] = await run("/no/such/harness --flag");
        assert.equal(r!.status, "infra_error");
        assert.match(r!.error!, /could not start/);
        assert.match((await metadata(r!.rolloutId!)).runner.logs.agent, /No such file/);
      });

      test("nothing is left behind: images and rollout folders are removed, even what an agent made unreadable", () => {
        assert.deepEqual(
          readdirSync(work).filter((name) => name.startsWith("rlgate-run-")),
          [],
        );
        if (kind === "podman") {
          const names = podman(["ps", "--all", "--format", "{{.Names}}"]).stdout.split("\n");
          assert.deepEqual(
            names.filter((n) => n.startsWith("rlgate-run-")),
            [],
            "no container left",
          );
          const images = podman(["images", "--format", "{{.Repository}}"]).stdout.split("\n");
          assert.deepEqual(
            images.filter((n) => n.includes("rlgate-graded")),
            [],
            "no graded image left",
          );
        }
      });
    },
  );

describe("rlgate run without a sandbox", () => {
  test("a task folder missing its parts is refused with the reason", () => {
    const dir = tempDir("bad-task");
    mkdirSync(join(dir, "workspace"));
    writeFileSync(join(dir, "task.json"), JSON.stringify({ verifier: "true", tests_dir: "../escape" }));
    assert.throws(() => loadTask(dir), /tests_dir: must be a relative path inside the workspace/);
    writeFileSync(join(dir, "task.json"), JSON.stringify({ verifier: "true" }));
    assert.throws(() => loadTask(dir), /prompt\.md is missing/);
    rmSync(dir, { recursive: true, force: true });
  });
});
