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
};

// Runtimes' start-up files (site hooks, .pth, conftest.py, rc files…: runner/bwrap-grade.ts's STARTUP_HOOKS), found
// at any depth of the workspace: put back as the image has them, as the bwrap grader does.
const HOOKS = (o.startupHooks ?? []).map((h) => `-name '${h.replace(/'/g, "")}'`).join(" -o ");
const RESTORE = `
cd "$1" || exit 1
tests_dir="$2"; shift 2
# A path as the image has it: removed (what the agent made unreadable is its own: opened first), then copied from the
# image where the image has it.
restore() {
  chmod -R u+rwX -- "$1" 2>/dev/null
  rm -rf -- "$1" || return 1
  if [ -e "/rlgate/image/$PWD/$1" ] || [ -L "/rlgate/image/$PWD/$1" ]; then
    mkdir -p -- "$(dirname -- "$1")" && cp -a -- "/rlgate/image/$PWD/$1" "$1" || return 1
  fi
}
hooks() {
  ${HOOKS ? `(cd "$1" && find . -mindepth 1 \\( ${HOOKS} \\) -prune -print0)` : "true"}
}
for p in "$@"; do restore "$p" || exit 1; done
# A folder the agent left searchable but not listable hides its files from find, not from a runtime that opens them
# by name (npm's .npmrc): listable again first (one at a time, so that find then descends into it).
find . -type d ! -perm -u=rx -exec chmod u+rx {} \\; 2>/dev/null
while IFS= read -r -d '' p; do chmod -R u+rwX -- "$p" 2>/dev/null; rm -rf -- "$p" || exit 1; done < <(hooks .)
while IFS= read -r -d '' p; do restore "$p" || exit 1; done < <(hooks "/rlgate/image/$PWD")
# Git runs what the repository's config and hooks name (fsmonitor, hooks, filters): a verifier that runs git
# (SWE-bench's do) would run what the agent wrote there. Put back as the image has them; a .git that is no longer a
# folder (a gitdir: file, a link) is the image's whole.
if [ -d .git ] && [ ! -L .git ] && [ -d "/rlgate/image/$PWD/.git" ] && [ ! -L "/rlgate/image/$PWD/.git" ]; then
  for p in .git/config .git/config.worktree .git/commondir .git/hooks .git/info; do restore "$p" || exit 1; done
else
  restore .git || exit 1
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
