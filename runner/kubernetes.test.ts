// The Kubernetes backend's objects, checked offline against the Kubernetes API's own schemas (kubernetes-models:
// the OpenAPI definitions of each kind, validated field by field) — no cluster here, so nothing below runs a Pod.
// Also the deploy manifests in docs/deploy/kubernetes/, and the isolation each rollout Pod states.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadAllYaml } from "@kubernetes/client-node";
import { Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { Role, RoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { ConfigMap, Pod, Service, ServiceAccount } from "kubernetes-models/v1";
import { resolveHarness } from "./harnesses.ts";
import { runTasks } from "./run.ts";
import { DEFAULT_LIMITS } from "./sandbox.ts";
import { loadTask } from "./task.ts";
import { rolloutManifests, type KubeRolloutSpec } from "./kubernetes.ts";

const KINDS: Record<string, new (data: any) => { validate(): void }> = {
  "v1/Pod": Pod,
  "v1/ConfigMap": ConfigMap,
  "v1/Service": Service,
  "v1/ServiceAccount": ServiceAccount,
  "apps/v1/StatefulSet": StatefulSet,
  "apps/v1/Deployment": Deployment,
  "networking.k8s.io/v1/NetworkPolicy": NetworkPolicy,
  "rbac.authorization.k8s.io/v1/Role": Role,
  "rbac.authorization.k8s.io/v1/RoleBinding": RoleBinding,
};

function validate(object: any): void {
  const Model = KINDS[`${object.apiVersion}/${object.kind}`];
  assert.ok(Model, `no schema here for ${object.apiVersion} ${object.kind}`);
  new Model(object).validate();
}

const SPEC: KubeRolloutSpec = {
  name: "rlgate-r-mx5nn28jc36da7b9cef0",
  namespace: "rlgate",
  rolloutId: "r_mx5nn28jc36da7b9cef0",
  image: "registry.example.com/tasks/fix-add:1",
  workdir: "/testbed",
  toolsImage: "registry.example.com/rlgate:latest",
  gateway: { host: "rlgate-gateway.rlgate.svc", port: 8700, podLabels: { "app.kubernetes.io/name": "rlgate-gateway" } },
  env: { HOME: "/home/agent", OPENAI_BASE_URL: "http://127.0.0.1:8700/r/r_mx5nn28jc36da7b9cef0/v1" },
  argv: ["qwen", "-p", "fix the bug", "--yolo"],
  grader: {
    testsDir: "tests",
    testPaths: ["tests"],
    verifier: "python3 tests/test_add.py",
    timeoutSec: 60,
    sample: 0,
    path: "/usr/local/bin:/usr/bin:/bin",
  },
  tests: new Map([
    ["test_add.py", Buffer.from("assert True\n")],
    ["sub/data.bin", Buffer.from([0, 255])],
  ]),
  testPatch: "diff --git a/t.py b/t.py\n",
  limits: DEFAULT_LIMITS,
  agentTimeoutSec: 300,
};

test("a rollout's Pod, NetworkPolicy and ConfigMap are valid against the Kubernetes schemas", () => {
  const { pod, networkPolicy, configMap } = rolloutManifests(SPEC);
  for (const object of [pod, networkPolicy, configMap]) validate(object);
  // The check can fail: a missing required field or a wrong type is refused. (These schemas do not refuse unknown
  // fields: the API server's strict field validation, which needs a cluster, would.)
  assert.throws(() => validate({ ...pod, spec: { ...pod.spec, containers: undefined } }), /containers/);
  assert.throws(
    () => validate({ ...pod, spec: { ...pod.spec, activeDeadlineSeconds: "soon" } }),
    /activeDeadlineSeconds/,
  );
  assert.throws(() => validate({ ...networkPolicy, spec: { ...networkPolicy.spec, podSelector: 3 } }), /podSelector/);
});

test("the rollout Pod's isolation: agent before grader, no cluster credentials, hidden tests in the grader only", () => {
  const { pod, networkPolicy, configMap } = rolloutManifests(SPEC);
  const spec = pod.spec!;
  assert.deepEqual(
    spec.initContainers!.map((c) => c.name),
    ["tools", "workspace", "agent"],
    "init containers run in order, each to its end: the grader starts after the agent's processes are gone",
  );
  assert.equal(spec.automountServiceAccountToken, false);
  assert.equal(spec.enableServiceLinks, false);
  const agent = spec.initContainers![2]!;
  assert.deepEqual(agent.securityContext, {
    runAsUser: 1000,
    runAsGroup: 1000,
    runAsNonRoot: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
    seccompProfile: { type: "RuntimeDefault" },
  });
  assert.equal(agent.resources!.limits!["memory"], String(DEFAULT_LIMITS.memoryBytes));
  assert.deepEqual(agent.command!.slice(0, 5), [
    "/opt/rlgate/bin/node",
    "/opt/rlgate/runner/sandbox-init.cjs",
    "8700",
    "rlgate-gateway.rlgate.svc:8700",
    "--",
  ]);
  const mounts = (c: (typeof spec.containers)[number]) => c.volumeMounts!.map((m) => m.name);
  assert.ok(
    !mounts(agent).includes("tests") && !mounts(agent).includes("pristine") && !mounts(agent).includes("result"),
  );
  const grader = spec.containers[0]!;
  assert.ok(mounts(grader).includes("tests") && mounts(grader).includes("test-patch"));
  assert.equal(grader.terminationMessagePath, "/rlgate/result/result.json", "the kubelet reads the result file");
  assert.deepEqual(grader.securityContext!.capabilities, { drop: ["ALL"], add: ["SETUID", "SETGID"] });
  // Nested test paths survive ConfigMap keys (which cannot hold '/').
  const tests = spec.volumes!.find((v) => v.name === "tests")!.configMap!;
  assert.deepEqual(tests.items, [
    { key: "f0", path: "test_add.py" },
    { key: "f1", path: "sub/data.bin" },
  ]);
  assert.equal(Buffer.from(configMap!.binaryData!["f1"]!, "base64").toString("hex"), "00ff");
  // Egress: the gateway's Pods on its port, and cluster DNS; no ingress at all.
  assert.deepEqual(networkPolicy.spec!.policyTypes, ["Ingress", "Egress"]);
  assert.deepEqual(networkPolicy.spec!.ingress, []);
  assert.deepEqual(networkPolicy.spec!.egress![0], {
    to: [{ podSelector: { matchLabels: { "app.kubernetes.io/name": "rlgate-gateway" } } }],
    ports: [{ protocol: "TCP", port: 8700 }],
  });
  assert.deepEqual(networkPolicy.spec!.podSelector, {
    matchLabels: { "rlgate.dev/rollout": "r_mx5nn28jc36da7b9cef0" },
  });
});

test("docs/deploy/kubernetes/rlgate.yaml: every object valid against the Kubernetes schemas; gateway and core are Services", () => {
  const docs = loadAllYaml(readFileSync(new URL("../docs/deploy/kubernetes/rlgate.yaml", import.meta.url), "utf8"));
  for (const object of docs) validate(object);
  const services = docs.filter((d: any) => d.kind === "Service").map((d: any) => d.metadata.name);
  assert.deepEqual(services, ["rlgate-gateway", "rlgate-core"]);
});

test("rlgate run --sandbox kubernetes: a cluster it cannot reach, a folder task or no tools image is refused before any rollout", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-kubeconfig-"));
  // A kubeconfig whose API server is nowhere (port 9 on loopback: nothing listens).
  writeFileSync(
    join(dir, "config"),
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters: [{name: none, cluster: {server: 'https://127.0.0.1:9'}}]",
      "users: [{name: none, user: {token: x}}]",
      "contexts: [{name: none, context: {cluster: none, user: none}}]",
      "current-context: none",
    ].join("\n"),
  );
  const saved = process.env["KUBECONFIG"];
  process.env["KUBECONFIG"] = join(dir, "config");
  const example = loadTask(new URL("../examples/tasks/fix-add", import.meta.url).pathname);
  const options = {
    harness: resolveHarness("echo {prompt}"),
    n: 1,
    concurrency: 1,
    gatewayUrl: "http://127.0.0.1:9",
    limits: DEFAULT_LIMITS,
    workDir: dir,
    sandbox: "kubernetes" as const,
    kubernetes: {
      namespace: "rlgate",
      toolsImage: "registry.example.com/rlgate:latest",
      gatewayService: "rlgate-gateway.rlgate.svc:8700",
      gatewayLabels: { "app.kubernetes.io/name": "rlgate-gateway" },
    },
  };
  try {
    const imageTask = { ...example, image: "registry.example.com/tasks/fix-add:1", workspace: null };
    await assert.rejects(
      runTasks({ ...options, tasks: [imageTask] }),
      /cannot sandbox rollouts on this machine: the cluster cannot be reached or namespace rlgate read/,
    );
    await assert.rejects(runTasks({ ...options, tasks: [example] }), /names no image: --sandbox kubernetes/);
    await assert.rejects(
      runTasks({ ...options, tasks: [{ ...example, image: "x" }] }),
      /has a workspace\/ folder or a setup: build its image with --sandbox podman/,
    );
    await assert.rejects(
      runTasks({ ...options, tasks: [imageTask], kubernetes: { ...options.kubernetes, toolsImage: "" } }),
      /needs --tools-image/,
    );
  } finally {
    if (saved === undefined) delete process.env["KUBECONFIG"];
    else process.env["KUBECONFIG"] = saved;
    rmSync(dir, { recursive: true, force: true });
  }
});
