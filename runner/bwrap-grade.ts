// Grading a bwrap rollout: a fresh sandbox without network over the agent's layer (read-only under it), whose own
// writes go to a tmpfs thrown away with it. It sees of the agent's work only the workspace, with everything the
// verifier's runtimes would run on their own at start-up put back as the task image has it; its HOME and /tmp are
// new, its environment is only what is set here. The agent's home and /tmp are never mounted into it.
import { WORKSPACE, type SandboxLimits, type SandboxSpec } from "./sandbox.ts";
import type { Task } from "./task.ts";

/** Exit code of the grade script when it could not put the tests in place (an infra error, not a failed verifier). */
export const GRADE_SETUP_FAILED = 120;

/**
 * Files a runtime picks up by itself where it finds them, so that code the agent left there would run before (or
 * instead of) anything the task asks: Python's site hooks and .pth files (a workspace on PYTHONPATH, a venv in the
 * workspace), pytest's conftest.py and pytest.ini, npm's, yarn's and pnpm's rc files, shell start-up files, direnv.
 * At any depth they are put back as the image has them (removed where it has none). A task whose work is such a file
 * cannot be graded on it.
 */
export const STARTUP_HOOKS = [
  "sitecustomize*",
  "usercustomize*",
  "*.pth",
  "conftest.py",
  "pytest.ini",
  ".npmrc",
  ".yarnrc",
  ".yarnrc.yml",
  ".pnpmfile.cjs",
  ".bashrc",
  ".bash_profile",
  ".bash_login",
  ".profile",
  ".envrc",
];

/** Git runs what its repository's config and hooks name (core.fsmonitor, core.pager, hooks/*): git's own, put back. */
const GIT_HOOKS = ["config", "config.worktree", "hooks", "info", "commondir"];

const SCRIPT = `
cd ${WORKSPACE} || exit ${GRADE_SETUP_FAILED}
tests_dir="$1"; verifier="$2"; shift 2
# A path as the image has it: removed, then copied from the image where the image has it.
restore() {
  rm -rf -- "$1" || return 1
  if [ -e "/rlgate/image/$1" ] || [ -L "/rlgate/image/$1" ]; then
    mkdir -p -- "$(dirname -- "$1")" && cp -a -- "/rlgate/image/$1" "$1" || return 1
  fi
}
hooks() {
  (cd "$1" && find . -mindepth 1 \\( ${STARTUP_HOOKS.map((h) => `-name '${h}'`).join(" -o ")} \\) -prune -print0)
}
for p in "$@"; do restore "$p" || exit ${GRADE_SETUP_FAILED}; done
# A folder the agent left searchable but not listable hides its files from find, not from a runtime that opens them
# by name: listable again first (one at a time, so that find then descends into it).
find . -type d ! -perm -u=rx -exec chmod u+rx {} \\; 2>/dev/null
while IFS= read -r -d '' p; do rm -rf -- "$p" || exit ${GRADE_SETUP_FAILED}; done < <(hooks .)
while IFS= read -r -d '' p; do restore "$p" || exit ${GRADE_SETUP_FAILED}; done < <(hooks /rlgate/image)
if [ -d .git ] && [ ! -L .git ] && [ -d /rlgate/image/.git ] && [ ! -L /rlgate/image/.git ]; then
  for p in ${GIT_HOOKS.map((h) => `.git/${h}`).join(" ")}; do restore "$p" || exit ${GRADE_SETUP_FAILED}; done
else
  restore .git || exit ${GRADE_SETUP_FAILED}
fi
if [ -d /rlgate/tests ]; then mkdir -p -- "$tests_dir" && cp -a /rlgate/tests/. "$tests_dir"/ || exit ${GRADE_SETUP_FAILED}; fi
exec bash -c "$verifier"
`;

export interface BwrapGradeOptions {
  task: Task;
  /** The task image's folder. */
  image: string;
  /** The agent's upper layer (read-only here). */
  agentLayer: string;
  /** A folder of the rollout's for grading's tmpfs and the overlay's mount point. */
  dir: string;
  sample: number;
  branch: number;
  limits: SandboxLimits;
}

export function gradeSpec(o: BwrapGradeOptions): SandboxSpec {
  return {
    lower: [o.agentLayer, o.image],
    upper: `${o.dir}/scratch/upper`,
    work: `${o.dir}/scratch/work`,
    mountpoint: `${o.dir}/mnt`,
    scratch: { dir: `${o.dir}/scratch`, bytes: o.limits.diskBytes ?? o.limits.memoryBytes },
    binds: [
      { src: o.image, dest: "/rlgate/image" },
      ...(o.task.tests ? [{ src: o.task.tests, dest: "/rlgate/tests" }] : []),
    ],
    // The agent's environment is the backbone's (a replay must see what it saw); the grader also learns the branch's
    // number (0: not a branch). HOME is the sandbox's own new /tmp.
    env: {
      HOME: "/tmp",
      TMPDIR: "/tmp",
      PATH: "/usr/local/bin:/usr/bin:/bin",
      RLGATE_SAMPLE: String(o.sample),
      RLGATE_BRANCH: String(o.branch),
    },
    argv: ["bash", "-c", SCRIPT, "grade", o.task.testsDir, o.task.verifier, ...o.task.testPaths],
    limits: o.limits,
  };
}
