// Runs one rollout's Pod (runner/kubernetes.ts) on a cluster through the official client (@kubernetes/client-node):
// creates its ConfigMap, NetworkPolicy and Pod, follows the Pod's status until the grader has written its result
// (the termination message) or the agent ended early, stops it at the agent's timeout, reads both containers' logs,
// and deletes what it made. The kubeconfig is the usual one (KUBECONFIG, ~/.kube/config, or in-cluster).
import { CoreV1Api, KubeConfig, NetworkingV1Api, type V1ContainerStatus, type V1Pod } from "@kubernetes/client-node";
import { setTimeout as sleep } from "node:timers/promises";
import { rolloutManifests, type KubeRolloutSpec } from "./kubernetes.ts";
import type { GraderResult } from "./podman-rollout.ts";
import type { SandboxExit } from "./sandbox.ts";

export interface KubeOutcome {
  agent: SandboxExit;
  agentLog: string;
  /** The grader's result (from the Pod's status), or null when grading did not happen. */
  result: GraderResult | null;
  gradeLog: string;
  /** Why the Pod could not run (image pull, scheduling, a failed init step), or null. */
  error: string | null;
}

const POLL_MS = 1000;
const PULL_ERRORS = new Set(["ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError"]);

export class KubernetesCluster {
  readonly core: CoreV1Api;
  readonly net: NetworkingV1Api;

  constructor(config?: KubeConfig) {
    const kc = config ?? new KubeConfig();
    if (!config) kc.loadFromDefault();
    this.core = kc.makeApiClient(CoreV1Api);
    this.net = kc.makeApiClient(NetworkingV1Api);
  }

  /** Null when the namespace can be read with this kubeconfig, else why not. */
  async unavailable(namespace: string): Promise<string | null> {
    try {
      await this.core.readNamespace({ name: namespace });
      return null;
    } catch (error) {
      return `the cluster cannot be reached or namespace ${namespace} read: ${(error as Error).message}`;
    }
  }

  async runRollout(spec: KubeRolloutSpec, signal?: AbortSignal): Promise<KubeOutcome> {
    const { pod, networkPolicy, configMap } = rolloutManifests(spec);
    const ns = spec.namespace;
    const started = Date.now();
    const exit = (stopped: SandboxExit["stopped"], code: number | null, agentStart: number | null): SandboxExit => ({
      code,
      signal: null,
      stopped,
      peakProcesses: 0,
      peakMemoryBytes: 0,
      ms: Date.now() - (agentStart ?? started),
      startError: null,
    });
    try {
      if (configMap) await this.core.createNamespacedConfigMap({ namespace: ns, body: configMap });
      // The policy first: the Pod never runs a moment without it.
      await this.net.createNamespacedNetworkPolicy({ namespace: ns, body: networkPolicy });
      await this.core.createNamespacedPod({ namespace: ns, body: pod });
      let agentStart: number | null = null;
      for (;;) {
        if (signal?.aborted) return await this.#end(spec, exit("aborted", null, agentStart), null, null);
        const live: V1Pod = await this.core.readNamespacedPod({ name: spec.name, namespace: ns });
        const init = live.status?.initContainerStatuses ?? [];
        const stuck = [...init, ...(live.status?.containerStatuses ?? [])].find((c) =>
          PULL_ERRORS.has(c.state?.waiting?.reason ?? ""),
        );
        if (stuck)
          return await this.#end(
            spec,
            exit(null, null, agentStart),
            null,
            `${stuck.name}: ${stuck.state!.waiting!.reason}: ${stuck.state!.waiting!.message ?? ""}`,
          );
        for (const step of ["tools", "workspace"]) {
          const t = init.find((c) => c.name === step)?.state?.terminated;
          if (t && t.exitCode !== 0)
            return await this.#end(
              spec,
              exit(null, null, agentStart),
              null,
              `init step ${step} failed (exit ${t.exitCode}): ${t.message ?? t.reason ?? ""}`,
            );
        }
        const agent = init.find((c) => c.name === "agent");
        if (agent?.state?.running && agentStart === null)
          agentStart = Date.parse(String(agent.state.running.startedAt)) || Date.now();
        const ended = agent?.state?.terminated;
        if (ended && ended.exitCode !== 0)
          return await this.#end(
            spec,
            exit(ended.reason === "OOMKilled" ? "memory" : null, ended.exitCode, agentStart),
            null,
            null,
          );
        if (!ended && agentStart !== null && Date.now() - agentStart > spec.agentTimeoutSec * 1000)
          return await this.#end(spec, exit("timeout", null, agentStart), null, null);
        const grader = terminated(live.status?.containerStatuses, "grader");
        if (grader) {
          let result: GraderResult | null = null;
          try {
            result = JSON.parse(grader.message ?? "") as GraderResult;
          } catch {
            /* no result: said by the caller */
          }
          return await this.#end(spec, exit(null, ended?.exitCode ?? 0, agentStart), result, null);
        }
        if (live.status?.phase === "Failed")
          return await this.#end(
            spec,
            exit(null, null, agentStart),
            null,
            `pod failed: ${live.status.reason ?? ""} ${live.status.message ?? ""}`.trim(),
          );
        await sleep(POLL_MS);
      }
    } catch (error) {
      return await this.#end(spec, exit(null, null, null), null, `kubernetes: ${(error as Error).message}`);
    }
  }

  async #end(
    spec: KubeRolloutSpec,
    agent: SandboxExit,
    result: GraderResult | null,
    error: string | null,
  ): Promise<KubeOutcome> {
    const log = (container: string) =>
      this.core
        .readNamespacedPodLog({ name: spec.name, namespace: spec.namespace, container, limitBytes: 1 << 20 })
        .catch(() => "");
    const [agentLog, gradeLog] = await Promise.all([log("agent"), log("grader")]);
    const gone = { namespace: spec.namespace, gracePeriodSeconds: 0 };
    await Promise.allSettled([
      this.core.deleteNamespacedPod({ name: spec.name, ...gone }),
      this.net.deleteNamespacedNetworkPolicy({ name: spec.name, ...gone }),
      this.core.deleteNamespacedConfigMap({ name: `${spec.name}-tests`, ...gone }),
    ]);
    return { agent, agentLog, result, gradeLog, error };
  }
}

function terminated(statuses: V1ContainerStatus[] | undefined, name: string) {
  return statuses?.find((c) => c.name === name)?.state?.terminated ?? null;
}
