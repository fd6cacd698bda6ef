// The grader inside a fresh grading container (plain CommonJS, run by the host's node bind-mounted in). It runs as
// root with no capability but SETUID/SETGID, and everything of the workspace runs as the unprivileged container user:
// restoring the test paths from the pristine image, copying or patching in the hidden tests, then the test command —
// the only time the agent's code runs. Only this process (root) writes the result file, in a folder that is root's
// alone (mode 0700), bind-mounted from the runner: the test command can print what it likes, it cannot write the result.
// usage: node podman-grade-init.cjs JSON   ({uid, workdir, testsDir, testPaths, verifier, timeoutSec, path, logLimit?})
"use strict";
const { spawn } = require("node:child_process");
const { writeFileSync, renameSync } = require("node:fs");

const RESULT = "/rlgate/result";
const o = JSON.parse(process.argv[2] || "{}");
// Kubernetes reads the result as a termination message (at most 4096 bytes): it asks for a short log there.
const LOG_LIMIT = o.logLimit ?? 1024 * 1024;
const env = {
  HOME: "/tmp",
  TMPDIR: "/tmp",
  PATH: o.path,
  LANG: "C.UTF-8",
  RLGATE_SAMPLE: String(o.sample ?? ""),
  RLGATE_BRANCH: String(o.branch ?? 0),
  // Git reads the workspace's .git/config, which the agent wrote: a verifier that runs git (SWE-bench's do) would run
  // its fsmonitor or hooks. Configuration from the environment overrides the repository's.
  GIT_CONFIG_COUNT: "2",
  GIT_CONFIG_KEY_0: "core.fsmonitor",
  GIT_CONFIG_VALUE_0: "false",
  GIT_CONFIG_KEY_1: "core.hooksPath",
  GIT_CONFIG_VALUE_1: "/dev/null",
};

const RESTORE = `
cd "$1" || exit 1
tests_dir="$2"; shift 2
# What the agent made unreadable is its own (uid 1000's): opened again before it is removed.
for p in "$@"; do
  chmod -R u+rwX -- "$p" 2>/dev/null
  rm -rf -- "$p" || exit 1
  if [ -e "/rlgate/image/$PWD/$p" ]; then mkdir -p -- "$(dirname -- "$p")" && cp -a -- "/rlgate/image/$PWD/$p" "$p" || exit 1; fi
done
# The repository's configuration, hooks and attributes are the task's, not the agent's (filters, fsmonitor, hooks).
if [ -d .git ] && [ ! -L .git ] && [ -d "/rlgate/image/$PWD/.git" ]; then
  for p in config hooks info; do
    chmod -R u+rwX -- ".git/$p" 2>/dev/null
    rm -rf -- ".git/$p" || exit 1
    if [ -e "/rlgate/image/$PWD/.git/$p" ]; then cp -a -- "/rlgate/image/$PWD/.git/$p" ".git/$p" || exit 1; fi
  done
fi
if [ -d /rlgate/tests ]; then mkdir -p -- "$tests_dir" && cp -a /rlgate/tests/. "$tests_dir"/ || exit 1; fi
if [ -f /rlgate/test.patch ]; then
  git -c core.hooksPath=/dev/null -c core.fsmonitor=false apply --whitespace=nowarn /rlgate/test.patch || patch -p1 --forward < /rlgate/test.patch || exit 1
fi
`;

function runAsUser(argv, limitMs) {
  return new Promise((resolve) => {
    let log = "";
    const child = spawn(argv[0], argv.slice(1), {
      cwd: o.workdir,
      env,
      uid: o.uid,
      gid: o.uid,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const add = (d) => {
      process.stdout.write(d);
      log = (log + d.toString("utf8")).slice(-LOG_LIMIT);
    };
    child.stdout.on("data", add);
    child.stderr.on("data", add);
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }, limitMs);
    let timedOut = false;
    child.on("error", (error) => resolve({ code: null, signal: null, error: error.message, log, timedOut }));
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, error: null, log, timedOut });
    });
  });
}

function finish(result) {
  // Written whole, then renamed: the runner never reads half a result.
  writeFileSync(`${RESULT}/result.tmp`, JSON.stringify(result));
  renameSync(`${RESULT}/result.tmp`, `${RESULT}/result.json`);
  process.exit(0);
}

(async () => {
  const restore = await runAsUser(
    ["bash", "-c", RESTORE, "restore", o.workdir, o.testsDir, ...o.testPaths],
    o.timeoutSec * 1000,
  );
  if (restore.code !== 0) return finish({ stage: "setup", ...restore });
  const test = await runAsUser(["bash", "-c", o.verifier], o.timeoutSec * 1000);
  finish({ stage: "test", ...test });
})().catch((error) => {
  process.stderr.write(`rlgate grader: ${error.stack || error}\n`);
  process.exit(1);
});
