// One rollout of `rlgate run`, stage by stage:
//   prepare  the rollout on the gateway, its directory, harness config files, the bridge to the gateway
//   agent    the harness in a sandbox whose workspace is an overlay over the task image (timeout, limits)
//   grade    a fresh sandbox without network, the agent's processes gone: its edits to test paths reverted, the
//            hidden tests copied in, the verifier run; exit 0 is reward 1, anything else 0 (under podman: a fresh
//            container, the reward read from a file only the grader can write: runner/podman-rollout.ts)
//   finish   reward and status posted to the gateway, with the stage reached and the logs in the rollout's metadata
import { textTail } from "../util/text-tail.ts";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startBridge, type Bridge } from "./bridge.ts";
import type { ControlClient } from "./control-client.ts";
import { branchCost, type BranchCost, type BranchJob } from "./branch.ts";
import { commonEnv, type Harness } from "./harnesses.ts";
import { chownTree, removeContainers } from "./podman.ts";
import { CONTAINER_BIN, gradeInPodman, nodeMount, startAgentContainer } from "./podman-rollout.ts";
import { runKubernetesStages, type KubeTarget } from "./kubernetes-rollout.ts";
import { GRADE_SETUP_FAILED, gradeSpec } from "./bwrap-grade.ts";
import { rolloutDisk, type DiskMethod, type RolloutDisk } from "./sandbox-disk.ts";
import {
  MOUNT_FAILED,
  ownForSandbox,
  ownTreeForSandbox,
  removeSandboxFolder,
  Sandbox,
  type SandboxExit,
  type SandboxLimits,
  WORKSPACE,
} from "./sandbox.ts";
import type { Task } from "./task.ts";

export type Stage = "prepare" | "agent" | "grade" | "finish" | "done";
export type RolloutStatus = "ok" | "infra_error" | "timeout" | "aborted";

export interface RolloutResult {
  task: string;
  sample: number;
  rolloutId: string | null;
  harness: string;
  status: RolloutStatus;
  reward: number | null;
  calls: number;
  trajectories: number | null;
  seconds: number;
  /** The stage the rollout ended in (where it failed, or "done"). */
  stage: Stage;
  error: string | null;
  /** Whether the gateway holds this result (reward and status as graded); false when finishing it failed, e.g.
   * because something else finished the rollout first: then what the gateway trains on is not the grader's. */
  recorded: boolean;
  /** A branch rollout (`--branch`): its backbone, point, number, and what it cost (null when it could not be read). */
  branch?: BranchJob & { cost: BranchCost | null };
}

export interface RolloutOptions {
  task: Task;
  /** The task image's folder (bwrap) or tag (podman), or why it could not be made. */
  image: string | { error: string };
  /** bwrap (default): folder tasks in bubblewrap; podman: image tasks in containers; kubernetes: image tasks as Pods. */
  backend?: "bwrap" | "podman" | "kubernetes";
  /** kubernetes: the cluster, namespace, tools image and gateway Service. */
  kubernetes?: KubeTarget;
  /** podman: PATH as the image sets it. */
  imagePath?: string;
  /** podman: the image's root folder, mounted on the host for the run (the grader's pristine copy). */
  imageRoot?: string;
  /** podman: the agent container's name (unique on the machine). */
  containerName?: string;
  sample: number;
  groupSize: number;
  group: string;
  generation?: string;
  /** The training round given to the rollout (control API `round`). */
  round?: number;
  harness: Harness;
  control: ControlClient;
  model: string;
  /** The rollout's own folder (removed afterwards unless keep). */
  dir: string;
  timeoutMs: number;
  limits: SandboxLimits;
  /** Extra read-only binds (the harness CLIs' install folder). */
  binds: { src: string; dest: string }[];
  pathPrefix: string[];
  /** Set in the harness's environment last (--env). */
  env?: Record<string, string>;
  rolloutKeyToBridge: boolean;
  keep: boolean;
  signal?: AbortSignal;
  onStage?: (stage: Stage, detail?: string) => void;
  /** Run as a branch of a finished rollout (runner/branch.ts): the gateway replays the calls before its point. */
  branch?: BranchJob;
  /** A backbone whose branch points go by entropy: its calls ask for this many top logprobs (runner/branch.ts). */
  entropyTopK?: number;
  /** bwrap: how the rollout's disk quota is kept (runner/sandbox-disk.ts); none: no quota. */
  diskMethod?: DiskMethod;
}

/** The port the harness reaches the gateway at inside its sandbox (its own network namespace: nothing else uses it). */
export const SANDBOX_GATEWAY_PORT = 8700;
const HOME = "/home/agent";
const RUN = "/run/rlgate";
const INIT = "/opt/rlgate/sandbox-init.cjs";
const INIT_SOURCE = join(dirname(fileURLToPath(import.meta.url)), "sandbox-init.cjs");
const LOG_LIMIT = 16_384;

function tail(text: string): string {
  return text.length > LOG_LIMIT ? `…${text.slice(-LOG_LIMIT)}` : text;
}

function describeExit(exit: SandboxExit): string {
  if (exit.stopped === "memory")
    return `stopped: its processes and in-RAM files (/tmp, /dev/shm) held more than the memory limit (peak ${Math.round(exit.peakMemoryBytes / 2 ** 20)} MiB)`;
  if (exit.stopped === "disk") return "stopped: its files took more than the disk limit (--disk)";
  if (exit.stopped === "processes")
    return `stopped: it reached the process limit (${exit.peakProcesses} processes and threads)`;
  if (exit.stopped) return `stopped: ${exit.stopped}`;
  if (exit.startError) return `could not start: ${exit.startError}`;
  return exit.signal ? `killed by ${exit.signal}` : `exit ${exit.code}`;
}

/** What the gateway holds for a rollout the runner could not finish, as a clause for its error. */
async function heldByGateway(control: ControlClient, id: string): Promise<string> {
  try {
    const r = await control.rollout(id);
    return ` (it holds status ${r.status}, reward ${r.reward ?? "null"})`;
  } catch {
    return "";
  }
}

export async function runRollout(o: RolloutOptions): Promise<RolloutResult> {
  const started = Date.now();
  const logs: Record<string, string> = {};
  let stage: Stage = "prepare";
  let status = "ok" as RolloutStatus;
  let reward: number | null = null;
  let error: string | null = null;
  let rolloutId: string | null = null;
  let bridge: Bridge | null = null;
  let disk: RolloutDisk | null = null;
  const podman = o.backend === "podman";
  const containers: string[] = [];
  const enter = (s: Stage, detail?: string) => {
    stage = s;
    o.onStage?.(s, detail);
  };
  const fail = (s: RolloutStatus, message: string) => {
    status = s;
    error = message;
  };
  const runBox = async (name: string, box: Pick<Sandbox, "child" | "exited">): Promise<SandboxExit> => {
    let log = "";
    const add = (d: Buffer) => {
      log = tail(log + d.toString("utf8"));
    };
    box.child.stdout!.on("data", add);
    box.child.stderr!.on("data", add);
    const exit = await box.exited;
    logs[name] = log;
    return exit;
  };

  try {
    enter("prepare");
    const created = await o.control.createRollout({
      group: o.group,
      task: o.task.name,
      harness: o.harness.name,
      ...(o.round === undefined ? {} : { round: o.round }),
      ...(o.branch
        ? {
            branch: {
              of: o.branch.of,
              at_call: o.branch.atCall,
              ...(o.branch.atToken === undefined ? {} : { at_token: o.branch.atToken }),
              on_divergence: o.branch.onDivergence,
              ...(o.branch.seed === undefined ? {} : { seed: o.branch.seed }),
            },
          }
        : {}),
      metadata: {
        group_size: o.groupSize,
        sample: o.sample,
        ...(o.generation === undefined ? {} : { generation: o.generation }),
        ...(o.branch ? { branch_index: o.branch.index } : {}),
        ...(o.entropyTopK === undefined ? {} : { entropy_top_k: o.entropyTopK }),
        runner: { stage: "prepare" },
      },
    });
    rolloutId = created.id;
    if (typeof o.image !== "string") throw new Error(o.image.error);
    const image = o.image;
    mkdirSync(o.dir, { recursive: true });
    ownForSandbox(o.dir);
    // What the agent writes (its workspace layer and its home) is under the quota; the socket and mount points not.
    const bwrap = !podman && o.backend !== "kubernetes";
    if (bwrap && o.diskMethod && o.limits.diskBytes !== undefined)
      disk = rolloutDisk(o.dir, o.limits.diskBytes, o.diskMethod);
    const writable = disk?.dir ?? o.dir;
    const dirs = {
      home: join(writable, "home"),
      run: join(o.dir, "run"),
      upper: join(writable, "upper"),
      work: join(writable, "work"),
      mnt: join(o.dir, "mnt"),
      grade: join(o.dir, "grade"),
    };
    for (const d of [dirs.home, dirs.run]) {
      mkdirSync(d, { recursive: true });
      ownForSandbox(d);
    }
    const ctx = {
      prompt: o.task.prompt,
      origin: `http://127.0.0.1:${SANDBOX_GATEWAY_PORT}`,
      rolloutId: created.id,
      model: o.model,
      home: HOME,
      workspace: WORKSPACE,
    };
    const launch = o.harness.launch(ctx);
    for (const [rel, content] of Object.entries(launch.files)) {
      const path = join(dirs.home, rel);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, content);
    }
    if (podman) chownTree(dirs.home);
    else ownTreeForSandbox(dirs.home);
    if (o.backend === "kubernetes") {
      // One Pod does both stages (runner/kubernetes.ts); no bridge: the harness reaches the gateway's Service.
      enter("agent");
      const k = await runKubernetesStages({
        target: o.kubernetes!,
        task: o.task,
        image,
        imagePath: o.imagePath ?? "/usr/local/bin:/usr/bin:/bin",
        rolloutId: created.id,
        rolloutKey: created.key,
        sample: o.sample,
        env: {
          HOME,
          TMPDIR: "/tmp",
          TERM: "dumb",
          NO_COLOR: "1",
          CI: "1",
          RLGATE_SAMPLE: String(o.sample),
          ...commonEnv(ctx),
          ...launch.env,
          ...o.env,
        },
        argv: launch.argv,
        limits: o.limits,
        timeoutMs: o.timeoutMs,
        signal: o.signal,
      });
      Object.assign(logs, k.logs);
      logs["agent_exit"] = describeExit(k.agentExit);
      if (k.error) fail("infra_error", k.error);
      else if (k.agentExit.stopped === "timeout") {
        fail("timeout", `the harness ran past ${Math.round(o.timeoutMs / 1000)} s`);
        reward = 0;
      } else if (k.agentExit.stopped === "aborted") fail("aborted", "the run was interrupted");
      else if (k.agentExit.stopped) fail("infra_error", `agent ${describeExit(k.agentExit)}`);
      else if (k.harnessExit === 126 || k.harnessExit === 127)
        fail("infra_error", `the harness could not start: ${textTail(k.logs["agent"] ?? "", 500)}`);
      else reward = k.reward;
    } else {
      bridge = await startBridge({
        socketPath: join(dirs.run, "gateway.sock"),
        gatewayUrl: o.control.url,
        rolloutId: created.id,
        rolloutKey: o.rolloutKeyToBridge ? created.key : undefined,
      });

      enter("agent");
      const env = {
        HOME,
        TMPDIR: "/tmp",
        TERM: "dumb",
        NO_COLOR: "1",
        CI: "1",
        PATH: [
          ...(podman ? [CONTAINER_BIN] : []),
          ...o.pathPrefix,
          ...(podman ? [o.imagePath ?? "/usr/local/bin:/usr/bin:/bin"] : ["/usr/local/bin", "/usr/bin", "/bin"]),
        ].join(":"),
        RLGATE_SAMPLE: String(o.sample),
        ...commonEnv(ctx),
        ...launch.env,
        ...o.env,
      };
      const initArgv = [INIT, String(SANDBOX_GATEWAY_PORT), `${RUN}/gateway.sock`, "--", ...launch.argv];
      const name = o.containerName ?? `rlgate-${created.id}`;
      if (podman) containers.push(name);
      const agent = podman
        ? startAgentContainer({
            name,
            image,
            imageRoot: o.imageRoot ?? "",
            dir: o.dir,
            task: o.task,
            mounts: [
              ...o.binds.map((b) => ({ type: "bind" as const, src: b.src, dest: b.dest })),
              { type: "bind", src: dirs.home, dest: HOME, rw: true },
              { type: "bind", src: dirs.run, dest: RUN },
              { type: "bind", src: INIT_SOURCE, dest: INIT },
            ],
            env,
            argv: [nodeMount().dest, ...initArgv],
            limits: o.limits,
            timeoutMs: o.timeoutMs,
            signal: o.signal,
          })
        : new Sandbox(
            {
              lower: [image],
              upper: dirs.upper,
              work: dirs.work,
              mountpoint: dirs.mnt,
              binds: [
                ...o.binds,
                { src: dirs.home, dest: HOME, rw: true },
                { src: dirs.run, dest: RUN },
                { src: INIT_SOURCE, dest: INIT },
              ],
              env,
              argv: [process.execPath, ...initArgv],
              limits: o.limits,
              ...(disk?.kind === "watch" ? { diskWatch: { dirs: [disk.dir], bytes: disk.bytes } } : {}),
            },
            { timeoutMs: o.timeoutMs, signal: o.signal },
          );
      const agentExit = await runBox("agent", agent);
      await bridge.close();
      bridge = null;
      logs["agent_exit"] = describeExit(agentExit);
      if (agentExit.stopped === "timeout") {
        fail("timeout", `the harness ran past ${Math.round(o.timeoutMs / 1000)} s`);
        reward = 0;
      } else if (agentExit.stopped === "aborted") fail("aborted", "the run was interrupted");
      else if (agentExit.stopped) fail("infra_error", `agent sandbox ${describeExit(agentExit)}`);
      else if (agentExit.startError) fail("infra_error", `agent sandbox ${describeExit(agentExit)}`);
      else if (agentExit.code === MOUNT_FAILED)
        fail(
          "infra_error",
          podman
            ? `the container could not start: ${textTail(logs["agent"] ?? "", 500)}`
            : `the workspace overlay could not be mounted: ${logs["agent"]?.trim()}`,
        );
      else if (agentExit.code === 126 || agentExit.code === 127)
        fail("infra_error", `the harness could not start: ${textTail(logs["agent"] ?? "", 500)}`);
      // A branch dropped on divergence is never graded nor trained (finished aborted, without a reward).
      const divergence =
        o.branch && error === null ? (await o.control.rollout(created.id)).metadata?.branch?.divergence : null;
      if (divergence?.action === "drop")
        fail(
          "aborted",
          `diverged from its backbone before its decision point (call ${divergence.at}: ${divergence.reason})`,
        );

      if (error === null && podman) {
        enter("grade");
        if (!o.imageRoot) throw new Error("the podman backend needs the task image mounted (imageRoot)");
        const graded = await gradeInPodman({
          agent: name,
          imageRoot: o.imageRoot,
          path: o.imagePath ?? "/usr/local/bin:/usr/bin:/bin",
          task: o.task,
          sample: o.sample,
          branch: o.branch?.index ?? 0,
          dir: o.dir,
          limits: o.limits,
          signal: o.signal,
        });
        logs["grade"] = tail(graded.log);
        logs["grade_exit"] = describeExit(graded.exit);
        if (graded.verdict) logs["grade_tests"] = JSON.stringify(graded.verdict.notPassed.slice(0, 50));
        if (graded.exit.stopped === "aborted") fail("aborted", "the run was interrupted");
        else if (graded.error !== null) fail("infra_error", graded.error);
        else reward = graded.reward;
      } else if (error === null) {
        enter("grade");
        const grader = new Sandbox(
          gradeSpec({
            task: o.task,
            image,
            agentLayer: dirs.upper,
            dir: dirs.grade,
            sample: o.sample,
            branch: o.branch?.index ?? 0,
            limits: o.limits,
          }),
          { timeoutMs: o.task.verifierTimeoutSec * 1000, signal: o.signal },
        );
        const gradeExit = await runBox("grade", grader);
        logs["grade_exit"] = describeExit(gradeExit);
        if (gradeExit.stopped === "aborted") fail("aborted", "the run was interrupted");
        else if (gradeExit.stopped || gradeExit.startError)
          fail("infra_error", `grading sandbox ${describeExit(gradeExit)}`);
        else if (gradeExit.code === MOUNT_FAILED || gradeExit.code === GRADE_SETUP_FAILED) {
          fail("infra_error", `grading could not be set up: ${textTail(logs["grade"] ?? "", 500)}`);
        } else reward = gradeExit.code === 0 ? 1 : 0;
      }
    }
  } catch (e) {
    fail("infra_error", e instanceof Error ? e.message : String(e));
  } finally {
    await bridge?.close();
    if (containers.length && !o.keep) removeContainers(containers);
    const unmounted = disk?.release();
    if (unmounted) error = error ? `${error}; ${unmounted}` : unmounted;
  }

  let endStage: Stage = error === null ? "done" : stage;
  enter("finish");
  let calls = 0;
  let trajectories: number | null = null;
  let recorded = false;
  if (status === "infra_error" || status === "aborted") reward = null;
  if (rolloutId !== null) {
    try {
      const finished = await o.control.finishRollout(rolloutId, {
        reward,
        status,
        metadata: { runner: { stage: endStage, error, logs } },
      });
      calls = finished.calls;
      trajectories = finished.trajectories;
      recorded = true;
    } catch (e) {
      // Said here, since it cannot be said there: the rollout is still open, or it holds what someone else posted.
      const held = await heldByGateway(o.control, rolloutId);
      error = `${error ? `${error}; ` : ""}finishing on the gateway failed${held}: ${e instanceof Error ? e.message : String(e)}`;
      endStage = "finish";
    }
  }
  const branch =
    o.branch && rolloutId !== null
      ? { ...o.branch, cost: await branchCost(o.control, o.branch, rolloutId).catch(() => null) }
      : undefined;
  if (!o.keep) {
    const leftover = removeSandboxFolder(o.dir);
    if (leftover) error = error ? `${error}; ${leftover}` : leftover;
  }
  enter("done");
  return {
    task: o.task.name,
    sample: o.sample,
    rolloutId,
    harness: o.harness.name,
    status,
    reward,
    calls,
    trajectories,
    seconds: (Date.now() - started) / 1000,
    stage: endStage,
    error,
    recorded,
    ...(branch ? { branch } : {}),
  };
}
