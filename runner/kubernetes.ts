// A rollout as Kubernetes objects (the many-machines backend; docs/deploy.md#kubernetes): one Pod, one NetworkPolicy,
// one ConfigMap of hidden tests. The stages map onto the Pod's containers, which Kubernetes runs in order:
//   init "tools"      copies node, the harness CLIs and rlgate's in-sandbox scripts from the rlgate image
//   init "workspace"  copies the task image's workdir into two emptyDirs: the agent's, and a pristine one
//   init "agent"      the harness, uid 1000, no capabilities, its workspace the emptyDir, limits; sandbox-init.cjs
//                     forwards 127.0.0.1:8700 to the gateway Service (the only egress the NetworkPolicy allows)
//   container "grader" starts once the agent has exited (its processes gone with its container): the same
//                     grader as podman's (runner/podman-grade-init.cjs), test paths restored from the pristine copy,
//                     hidden tests from the ConfigMap (mounted in no other container), test command as uid 1000;
//                     its result file is the container's terminationMessagePath, which the kubelet reads: the reward
//                     comes from the Pod's status, never from anything the agent's uid can write
// The service account token is not mounted and service links are off: the agent learns nothing of the cluster.
import type { V1ConfigMap, V1Container, V1NetworkPolicy, V1Pod, V1SecurityContext } from "@kubernetes/client-node";
import type { SandboxLimits } from "./sandbox.ts";

/** The result file is the grader's termination message, which the kubelet cuts at 4096 bytes: a short log tail in it
 * (the whole log is read from the API). */
export const GRADER_LOG_LIMIT = 1024;

export interface KubeRolloutSpec {
  /** The Pod's name (DNS-1123: lowercase letters, digits, '-'); the ConfigMap is NAME-tests. */
  name: string;
  namespace: string;
  rolloutId: string;
  /** The task image, pullable by the cluster's nodes (a prepared image: rlgate's podman backend builds them). */
  image: string;
  workdir: string;
  /** The image with /opt/rlgate (node, node_modules, the in-sandbox scripts): docs/deploy/kubernetes/Containerfile. */
  toolsImage: string;
  /** The gateway Service the harness reaches, and the labels of its Pods (the NetworkPolicy's one egress). */
  gateway: { host: string; port: number; podLabels: Record<string, string> };
  env: Record<string, string>;
  /** The harness's command line (run by sandbox-init.cjs after its forwarder listens). */
  argv: string[];
  grader: {
    testsDir: string;
    testPaths: string[];
    verifier: string;
    timeoutSec: number;
    sample: number;
    path: string;
  };
  /** Hidden test files (path under tests_dir → content) and the test patch, if any. */
  tests: Map<string, Buffer> | null;
  testPatch: string | null;
  limits: SandboxLimits;
  agentTimeoutSec: number;
}

const UID = 1000;
const PORT_INSIDE = 8700;
const LABEL = "rlgate.dev/rollout";
/** A rollout id as a label value (at most 63 characters of [A-Za-z0-9._-]). */
export const rolloutLabel = (id: string) => id.replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 63);

const locked = (user: number, caps: string[] = []): V1SecurityContext => ({
  runAsUser: user,
  runAsGroup: user,
  runAsNonRoot: user !== 0,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ["ALL"], ...(caps.length ? { add: caps } : {}) },
  seccompProfile: { type: "RuntimeDefault" },
});

export function rolloutManifests(s: KubeRolloutSpec): {
  pod: V1Pod;
  networkPolicy: V1NetworkPolicy;
  configMap: V1ConfigMap | null;
} {
  const labels = {
    "app.kubernetes.io/part-of": "rlgate",
    "app.kubernetes.io/component": "rollout",
    [LABEL]: rolloutLabel(s.rolloutId),
  };
  const memory = String(s.limits.memoryBytes);
  const testsName = `${s.name}-tests`;
  const files = [...(s.tests ?? new Map<string, Buffer>()).entries()];
  // ConfigMap keys cannot hold '/': numbered keys, mapped back to their paths by the volume's items.
  const configMap: V1ConfigMap | null =
    files.length || s.testPatch
      ? {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: testsName, namespace: s.namespace, labels },
          binaryData: Object.fromEntries(files.map(([, content], i) => [`f${i}`, content.toString("base64")])),
          ...(s.testPatch ? { data: { "test.patch": s.testPatch } } : {}),
        }
      : null;
  const tools = { name: "tools", mountPath: "/opt/rlgate", readOnly: true };
  const work = { name: "work", mountPath: s.workdir };
  const agent: V1Container = {
    name: "agent",
    image: s.image,
    workingDir: s.workdir,
    command: [
      "/opt/rlgate/bin/node",
      "/opt/rlgate/runner/sandbox-init.cjs",
      String(PORT_INSIDE),
      `${s.gateway.host}:${s.gateway.port}`,
      "--",
      ...s.argv,
    ],
    env: Object.entries(s.env).map(([name, value]) => ({ name, value })),
    securityContext: locked(UID),
    resources: { limits: { memory, "ephemeral-storage": "10Gi" }, requests: { memory: "256Mi", cpu: "250m" } },
    volumeMounts: [tools, work, { name: "home", mountPath: "/home/agent" }, { name: "tmp", mountPath: "/tmp" }],
  };
  const grader: V1Container = {
    name: "grader",
    image: s.image,
    workingDir: s.workdir,
    command: [
      "/opt/rlgate/bin/node",
      "/opt/rlgate/runner/podman-grade-init.cjs",
      JSON.stringify({ uid: UID, workdir: s.workdir, ...s.grader, logLimit: GRADER_LOG_LIMIT }),
    ],
    securityContext: locked(0, ["SETUID", "SETGID"]),
    resources: { limits: { memory }, requests: { memory: "256Mi", cpu: "250m" } },
    terminationMessagePath: "/rlgate/result/result.json",
    terminationMessagePolicy: "File",
    volumeMounts: [
      tools,
      work,
      { name: "pristine", mountPath: `/rlgate/image${s.workdir}`, readOnly: true },
      { name: "result", mountPath: "/rlgate/result" },
      { name: "tmp", mountPath: "/tmp" },
      ...(files.length ? [{ name: "tests", mountPath: "/rlgate/tests", readOnly: true }] : []),
      ...(s.testPatch
        ? [{ name: "test-patch", mountPath: "/rlgate/test.patch", subPath: "test.patch", readOnly: true }]
        : []),
    ],
  };
  const pod: V1Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: s.name, namespace: s.namespace, labels },
    spec: {
      restartPolicy: "Never",
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      hostname: "sandbox",
      // A backstop for a runner that died: the runner itself stops the agent at its timeout.
      activeDeadlineSeconds: s.agentTimeoutSec + s.grader.timeoutSec + 300,
      securityContext: { fsGroup: UID },
      initContainers: [
        {
          name: "tools",
          image: s.toolsImage,
          command: ["cp", "-a", "/opt/rlgate/.", "/tools/"],
          securityContext: locked(UID),
          volumeMounts: [{ name: "tools", mountPath: "/tools" }],
        },
        {
          name: "workspace",
          image: s.image,
          command: [
            "sh",
            "-c",
            'cp -a "$1"/. /work/ && cp -a "$1"/. /pristine/ && chown -R 1000:1000 /work /home/agent',
            "workspace",
            s.workdir,
          ],
          securityContext: locked(0, ["CHOWN", "DAC_OVERRIDE", "FOWNER"]),
          volumeMounts: [
            { name: "work", mountPath: "/work" },
            { name: "pristine", mountPath: "/pristine" },
            { name: "home", mountPath: "/home/agent" },
          ],
        },
        agent,
      ],
      containers: [grader],
      volumes: [
        { name: "tools", emptyDir: {} },
        { name: "work", emptyDir: {} },
        { name: "pristine", emptyDir: {} },
        { name: "home", emptyDir: {} },
        { name: "tmp", emptyDir: {} },
        { name: "result", emptyDir: { medium: "Memory", sizeLimit: "1Mi" } },
        ...(files.length
          ? [
              {
                name: "tests",
                configMap: { name: testsName, items: files.map(([path], i) => ({ key: `f${i}`, path })) },
              },
            ]
          : []),
        ...(s.testPatch
          ? [{ name: "test-patch", configMap: { name: testsName, items: [{ key: "test.patch", path: "test.patch" }] } }]
          : []),
      ],
    },
  };
  const networkPolicy: V1NetworkPolicy = {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: s.name, namespace: s.namespace, labels },
    spec: {
      podSelector: { matchLabels: { [LABEL]: labels[LABEL] } },
      policyTypes: ["Ingress", "Egress"],
      ingress: [],
      egress: [
        {
          to: [{ podSelector: { matchLabels: s.gateway.podLabels } }],
          ports: [{ protocol: "TCP", port: s.gateway.port }],
        },
        // The gateway's Service name must resolve: cluster DNS, nothing else.
        {
          to: [{ namespaceSelector: {}, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }],
          ports: [
            { protocol: "UDP", port: 53 },
            { protocol: "TCP", port: 53 },
          ],
        },
      ],
    },
  };
  return { pod, networkPolicy, configMap };
}
