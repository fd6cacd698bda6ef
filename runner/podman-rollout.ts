// The agent and grade stages of a rollout under podman (the stages themselves are runner/rollout.ts's):
//   agent  a container from the task's prepared image: no network but the bridge's Unix socket, the container user,
//          limits; the harness CLIs and node come from the host, read-only
//   grade  the agent's container committed to an image, and a fresh container started from it with no network and
//          none of the agent's processes; runner/podman-grade-init.cjs restores the test paths from the pristine image,
//          puts the hidden tests in and runs the test command as the container user; it alone writes the result, to a
//          folder of the runner's that the test command cannot reach; the reward is read from that file
import { chmodSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Container, CONTAINER_UID, podman, removeContainers, type Mount } from "./podman.ts";
import type { SandboxExit, SandboxLimits } from "./sandbox.ts";
import type { Task } from "./task.ts";
import { testOutcomes, type TestsVerdict } from "./datasets-test-log.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
const NODE_IN_CONTAINER = "/opt/rlgate/bin/node";
const GRADER = "/opt/rlgate/grade-init.cjs";

/** The host's node, bind-mounted: the bridge's listener and the harness CLIs run on it inside any image. */
export function nodeMount(): Mount {
  return { type: "bind", src: realpathSync(process.execPath), dest: NODE_IN_CONTAINER };
}
export const CONTAINER_BIN = dirname(NODE_IN_CONTAINER);

export interface PodmanAgentOptions {
  name: string;
  image: string;
  task: Task;
  mounts: Mount[];
  env: Record<string, string>;
  argv: string[];
  limits: SandboxLimits;
  timeoutMs: number;
  signal?: AbortSignal;
}

export function startAgentContainer(o: PodmanAgentOptions): Container {
  return new Container(
    {
      name: o.name,
      image: o.image,
      user: `${CONTAINER_UID}:${CONTAINER_UID}`,
      workdir: o.task.workdir,
      mounts: [nodeMount(), ...o.mounts],
      env: o.env,
      argv: o.argv,
      limits: o.limits,
    },
    { timeoutMs: o.timeoutMs, signal: o.signal },
  );
}

export interface PodmanGrade {
  exit: SandboxExit;
  log: string;
  /** The reward, or null with `error` (an infra error: grading could not be set up or ran past its time). */
  reward: number | null;
  error: string | null;
  verdict: TestsVerdict | null;
}

export interface GraderResult {
  stage: "setup" | "test";
  code: number | null;
  signal: string | null;
  error: string | null;
  log: string;
  timedOut: boolean;
}

export async function gradeInPodman(o: {
  agent: string;
  /** The task image's root folder, mounted on the host (mountImage): the pristine test paths come from it. */
  imageRoot: string;
  path: string;
  task: Task;
  sample: number;
  /** The branch's number (0: not a branch), for the grader as bwrap's gets it. */
  branch: number;
  dir: string;
  limits: SandboxLimits;
  signal?: AbortSignal;
}): Promise<PodmanGrade> {
  const graded = `localhost/rlgate-graded:${o.agent}`;
  const grader = `${o.agent}-grade`;
  const result = join(o.dir, "result");
  // Root's alone: the test command (uid 1000) can neither read nor write it; only the grader (root) writes.
  mkdirSync(result, { recursive: true });
  chmodSync(result, 0o700);
  try {
    const commit = podman(["commit", "--quiet", o.agent, graded]);
    if (commit.status !== 0) throw new Error(`committing the agent's container failed: ${commit.stderr.trim()}`);
    const mounts: Mount[] = [
      nodeMount(),
      { type: "bind", src: join(HERE, "podman-grade-init.cjs"), dest: GRADER },
      { type: "bind", src: o.imageRoot, dest: "/rlgate/image" },
      { type: "bind", src: result, dest: "/rlgate/result", rw: true },
    ];
    if (o.task.tests) mounts.push({ type: "bind", src: o.task.tests, dest: "/rlgate/tests" });
    if (o.task.testPatch) {
      const patch = join(o.dir, "test.patch");
      writeFileSync(patch, o.task.testPatch);
      chmodSync(patch, 0o644);
      mounts.push({ type: "bind", src: patch, dest: "/rlgate/test.patch" });
    }
    const timeoutSec = o.task.verifierTimeoutSec;
    const box = new Container(
      {
        name: grader,
        image: graded,
        user: "0:0",
        caps: ["SETUID", "SETGID"],
        workdir: o.task.workdir,
        mounts,
        env: {},
        argv: [
          NODE_IN_CONTAINER,
          GRADER,
          JSON.stringify({
            uid: CONTAINER_UID,
            workdir: o.task.workdir,
            testsDir: o.task.testsDir,
            testPaths: o.task.testPaths,
            verifier: o.task.verifier,
            timeoutSec,
            sample: o.sample,
            branch: o.branch,
            path: o.path,
          }),
        ],
        limits: o.limits,
      },
      // The grader stops the test command at verifier_timeout itself; the container gets a margin for the rest.
      { timeoutMs: timeoutSec * 1000 + 60_000, signal: o.signal },
    );
    let log = "";
    const add = (d: Buffer) => {
      log = (log + d.toString("utf8")).slice(-16_384);
    };
    box.child.stdout!.on("data", add);
    box.child.stderr!.on("data", add);
    const exit = await box.exited;
    let r: GraderResult | null = null;
    try {
      r = JSON.parse(readFileSync(join(result, "result.json"), "utf8")) as GraderResult;
    } catch {
      /* judged below */
    }
    return { exit, log, ...judgeGrade(o.task, r, r?.log ?? "", exitText(exit)) };
  } finally {
    // The agent's container goes too (rollout.ts removes it again, harmlessly): one call for both.
    removeContainers([o.agent, grader], [graded]);
  }
}

/** The reward from the grader's result (podman's file, Kubernetes' termination message), or why there is none.
 * `log` is the test command's output the named tests are read from. */
export function judgeGrade(
  task: Task,
  r: GraderResult | null,
  log: string,
  exitText: string,
): Pick<PodmanGrade, "reward" | "error" | "verdict"> {
  const none = (error: string) => ({ reward: null, error, verdict: null });
  if (!r) return none(`the grader wrote no result (${exitText})`);
  if (r.timedOut) return none(`grading ran past verifier_timeout (${task.verifierTimeoutSec} s)`);
  if (r.stage === "setup") return none(`grading could not be set up: ${r.log.trim().slice(-500)}`);
  if (r.error) return none(`the test command could not start: ${r.error}`);
  if (task.reward.kind === "exit_code") return { reward: r.code === 0 ? 1 : 0, error: null, verdict: null };
  const verdict = testOutcomes(log, task.reward);
  return { reward: verdict.passed ? 1 : 0, error: null, verdict };
}

function exitText(exit: SandboxExit): string {
  if (exit.stopped) return `stopped: ${exit.stopped}`;
  if (exit.startError) return `could not start: ${exit.startError}`;
  return exit.signal ? `killed by ${exit.signal}` : `exit ${exit.code}`;
}
