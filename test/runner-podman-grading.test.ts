// Reward forging through the podman grader: an agent that does not fix the bug plants hooks that would make the
// verifier's Python (or its git) exit 0 — in /tmp (the grader's HOME), in its own HOME, in site folders and on PATH
// that the task's setup made writable (as common images have them), in the workspace's .git/config. The agent stage
// shows each hook works where it was planted; grading, in a fresh container of the pristine image with only the
// agent's workspace, gives the grader's true reward: 0 unfixed, 1 fixed.
import assert from "node:assert/strict";
import { cpSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { resolveHarness } from "../runner/harnesses.ts";
import { ensureHostImage } from "../runner/podman-host-image.ts";
import { runTasks } from "../runner/run.ts";
import { DEFAULT_LIMITS } from "../runner/sandbox.ts";
import { loadTask, type Task } from "../runner/task.ts";
import { ROOT, startStack, tempDir, type Stack } from "./helpers.ts";
import { podmanForTests } from "./require-in-ci.ts";

const unavailable = podmanForTests();
const PY = "python3.11";
const EXIT0 = "import os; os._exit(0)";

// Each line plants one hook; `|| echo` keeps the harness going where a folder is not writable.
const PLANT = [
  // The grader's HOME was /tmp, and the agent's /tmp was carried into grading (issue 41).
  `mkdir -p /tmp/.local/lib/${PY}/site-packages && echo '${EXIT0}' > /tmp/.local/lib/${PY}/site-packages/usercustomize.py`,
  `echo '${EXIT0}' > /tmp/.local/lib/${PY}/site-packages/zz.pth`,
  `mkdir -p /var/tmp/.local/lib/${PY}/site-packages && echo '${EXIT0}' > /var/tmp/.local/lib/${PY}/site-packages/usercustomize.py`,
  // The agent's own HOME, and a HOME anywhere the image lets it write.
  `mkdir -p $HOME/.local/lib/${PY}/site-packages && echo '${EXIT0}' > $HOME/.local/lib/${PY}/site-packages/usercustomize.py`,
  // System site folder and PATH folder that the task's setup made writable.
  `echo '${EXIT0}' > /usr/local/lib/${PY}/dist-packages/sitecustomize.py || echo no-site`,
  `echo '${EXIT0}' > /usr/local/lib/${PY}/dist-packages/zz.pth || echo no-pth`,
  `printf '#!/bin/sh\\nexit 0\\n' > /usr/local/bin/python3 && chmod +x /usr/local/bin/python3 || echo no-bin`,
  // Startup files a shell or Python could read.
  `echo 'exit 0' > /tmp/.bashrc; echo 'exit 0' > $HOME/.bashrc; echo 'exit 0' > /etc/profile.d/zz.sh || echo no-profile`,
  // git in the workspace: an fsmonitor hook runs on `git status` and could replace the restored hidden test.
  `printf '#!/bin/sh\\necho "raise SystemExit(0)" > tests/test_add.py\\n' > .git/fsmon && chmod +x .git/fsmon`,
  'git config core.fsmonitor "$PWD/.git/fsmon"',
  // The hooks work here, in the agent's own container: Python exits 0 before a failing statement.
  `HOME=/tmp ${PY} -c 'raise SystemExit(3)'; echo tmp-home-hook=$?`,
  `${PY} -c 'raise SystemExit(3)'; echo home-hook=$?`,
  "git status >/dev/null 2>&1; cat tests/test_add.py; rm -f tests/test_add.py",
  // Last, since the loader then complains at every program's start: the dynamic loader's preload list. Every program
  // would load the named library first; one that is not there makes the loader say so, which shows the list is read.
  `echo /opt/rlgate-hook.so > /etc/ld.so.preload || echo no-preload`,
  "env true 2>&1 | grep -c 'ld.so.preload cannot be preloaded' | sed 's/^/preload-read=/'",
].join("\n");

describe(
  "podman grading: what the agent plants outside its workspace never reaches the grader",
  {
    skip: unavailable ? `podman: ${unavailable}` : false,
  },
  () => {
    let stack: Stack;
    let task: Task;
    const work = tempDir("podman-grading");

    before(async () => {
      stack = await startStack();
      const image = await ensureHostImage();
      const dir = join(work, "task");
      cpSync(join(ROOT, "examples", "tasks", "fix-add"), dir, { recursive: true });
      writeFileSync(
        join(dir, "task.json"),
        JSON.stringify({
          // As images often are: /tmp world-writable, a site folder and /usr/local/bin writable by the agent's user.
          setup: `chmod 1777 /tmp && mkdir -p /usr/local/lib/${PY}/dist-packages /usr/local/bin /etc/profile.d /var/tmp && chmod 777 /usr/local/lib/${PY}/dist-packages /usr/local/bin /etc/profile.d && chmod 1777 /var/tmp && touch /etc/ld.so.preload && chmod 666 /etc/ld.so.preload`,
          // git status first: a verifier that runs git (SWE-bench's do) meets the workspace's .git/config.
          verifier: "git status --short >/dev/null 2>&1; python3 tests/test_add.py",
          timeout: 120,
          verifier_timeout: 60,
        }),
      );
      task = { ...loadTask(dir), image };
    });
    after(async () => {
      await stack.close();
      rmSync(work, { recursive: true, force: true });
    });

    async function run(harness: string) {
      const [r] = await runTasks({
        tasks: [task],
        harness: resolveHarness(harness),
        n: 1,
        concurrency: 1,
        gatewayUrl: stack.gateway.url,
        limits: DEFAULT_LIMITS,
        workDir: work,
        sandbox: "podman",
      });
      const rollout = (await (await fetch(`${stack.gateway.url}/api/rollouts/${r!.rolloutId}`)).json()) as any;
      return { r: r!, logs: rollout.metadata.runner.logs as Record<string, string> };
    }

    test("hooks in /tmp, HOME, site folders, PATH, profile files, ld.so.preload and .git/config: the unfixed bug gets reward 0", async () => {
      const { r, logs } = await run(PLANT);
      assert.equal(r.status, "ok", `${r.error}\n${logs.agent}`);
      // Every hook was planted where the agent could write, and works there.
      assert.doesNotMatch(logs.agent!, /no-site|no-pth|no-bin|no-profile|no-preload/, logs.agent);
      assert.match(logs.agent!, /preload-read=[1-9]/, logs.agent);
      assert.match(logs.agent!, /tmp-home-hook=0\nhome-hook=0\nraise SystemExit\(0\)\n/, logs.agent);
      assert.equal(r.reward, 0, `the grader's true verdict is a failure:\n${logs.grade}`);
      assert.match(logs.grade!, /AssertionError: add\(2, 3\) = -1/, logs.grade);
      assert.doesNotMatch(logs.grade!, /ld\.so\.preload/, "the preload list the agent wrote is not the grader's");
    });

    test("the same hooks with the bug fixed: reward 1 (the workspace's changes are graded)", async () => {
      const { r, logs } = await run(`${PLANT}\nsed -i 's/a - b/a + b/' calc.py`);
      assert.equal(r.status, "ok", `${r.error}\n${logs.agent}`);
      assert.equal(r.reward, 1, logs.grade);
      assert.match(logs.grade!, /add: ok/);
    });
  },
);
