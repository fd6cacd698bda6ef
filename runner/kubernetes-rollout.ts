// The agent and grade stages of a rollout on Kubernetes (runner/kubernetes.ts's Pod), as runner/rollout.ts uses them:
// the Pod does both stages; here its outcome becomes the same statuses and rewards as the other backends'.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import type { KubernetesCluster } from "./kubernetes-cluster.ts";
import type { KubeRolloutSpec } from "./kubernetes.ts";
import { judgeGrade } from "./podman-rollout.ts";
import type { SandboxExit, SandboxLimits } from "./sandbox.ts";
import type { Task } from "./task.ts";

export interface KubeTarget {
  cluster: KubernetesCluster;
  namespace: string;
  toolsImage: string;
  gateway: KubeRolloutSpec["gateway"];
}

export interface KubeStages {
  agentExit: SandboxExit;
  logs: Record<string, string>;
  /** What the agent's command exited with (the Pod's agent step always ends 0, so that grading follows). */
  harnessExit: number | null;
  reward: number | null;
  error: string | null;
}

/** The agent step's own status line: the Pod goes on to grading whatever the harness exited with. */
export const AGENT_EXIT_MARK = "rlgate-agent-exit=";

function readTests(dir: string | null): Map<string, Buffer> | null {
  if (!dir) return null;
  const files = new Map<string, Buffer>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else files.set(relative(dir, path), readFileSync(path));
    }
  };
  walk(dir);
  return files;
}

export async function runKubernetesStages(o: {
  target: KubeTarget;
  task: Task;
  image: string;
  imagePath: string;
  rolloutId: string;
  rolloutKey: string;
  sample: number;
  env: Record<string, string>;
  argv: string[];
  limits: SandboxLimits;
  timeoutMs: number;
  signal?: AbortSignal;
}): Promise<KubeStages> {
  const out = await o.target.cluster.runRollout(
    {
      name: `rlgate-${o.rolloutId.toLowerCase().replace(/[^a-z0-9-]/g, "-")}`.slice(0, 63),
      namespace: o.target.namespace,
      rolloutId: o.rolloutId,
      image: o.image,
      workdir: o.task.workdir,
      toolsImage: o.target.toolsImage,
      gateway: o.target.gateway,
      env: {
        ...o.env,
        PATH: `/opt/rlgate/bin:/opt/rlgate/node_modules/.bin:${o.imagePath}`,
        // No bridge adds the rollout's key here: the harness sends it (the gateway runs with --token on a cluster).
        OPENAI_API_KEY: o.rolloutKey,
        ANTHROPIC_API_KEY: o.rolloutKey,
      },
      argv: ["sh", "-c", `"$@"; echo "${AGENT_EXIT_MARK}$?"`, "agent", ...o.argv],
      grader: {
        testsDir: o.task.testsDir,
        testPaths: o.task.testPaths,
        verifier: o.task.verifier,
        timeoutSec: o.task.verifierTimeoutSec,
        sample: o.sample,
        path: o.imagePath,
      },
      tests: readTests(o.task.tests),
      testPatch: o.task.testPatch,
      limits: o.limits,
      agentTimeoutSec: Math.ceil(o.timeoutMs / 1000),
    },
    o.signal,
  );
  const logs = { agent: out.agentLog.slice(-16_384), grade: out.gradeLog.slice(-16_384) };
  const mark = [...out.agentLog.matchAll(new RegExp(`^${AGENT_EXIT_MARK}(\\d+)$`, "gm"))].pop();
  const harnessExit = mark ? Number(mark[1]) : null;
  const base = { agentExit: out.agent, logs, harnessExit };
  if (out.error) return { ...base, reward: null, error: out.error };
  if (out.agent.stopped) return { ...base, reward: null, error: null };
  const judged = judgeGrade(o.task, out.result, out.gradeLog, `pod status: ${out.result ? "result" : "none"}`);
  return { ...base, reward: judged.reward, error: judged.error };
}
