// An adversary's agent, run by `rlgate run` inside each sandbox backend: it tries to reach anything but its own
// rollout's inference routes (the control API in every spelling of a path, other rollouts, /ui, /api/events, /metrics,
// the gRPC port, upstream admin routes, the grader's files) and to plant start-up hooks for the grader. Every try must
// be refused (a 4xx or no answer, never 2xx or 5xx), and the reward the gateway holds must be the grader's.
//
// Extension point: a backend is an entry of BACKENDS — how to tell it cannot start here, and how a task folder runs on
// it (podman: as an image task over the host base image, as test/runner-isolation.test.ts does).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { chmodSync, cpSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { startRunGateway, type RunGateway } from "../cli/run-gateway.ts";
import { resolveHarness } from "../runner/harnesses.ts";
import type { RolloutResult } from "../runner/rollout.ts";
import { runTasks, type SandboxKind } from "../runner/run.ts";
import { DEFAULT_LIMITS } from "../runner/sandbox.ts";
import { loadTask, type Task } from "../runner/task.ts";
import { ROOT, startStack, tempDir, type Stack } from "./helpers.ts";
import { attackBaseImage } from "./podman-attack-image.ts";
import { ATTACK_AGENT, HOOK_AGENT, HOOK_VERIFIER, REFUSED } from "./sandbox-attacks-scripts.ts";
import { bwrapForTests, podmanForTests } from "./require-in-ci.ts";

interface Backend {
  kind: SandboxKind;
  unavailable: () => string | null;
  /** A task folder as this backend runs it. */
  task: (dir: string) => Promise<Task> | Task;
}

const BACKENDS: Backend[] = [
  {
    kind: "bwrap",
    unavailable: () => {
      const scratch = tempDir("attacks-probe");
      const why = bwrapForTests(scratch);
      rmSync(scratch, { recursive: true, force: true });
      return why;
    },
    task: (dir) => loadTask(dir),
  },
  {
    kind: "podman",
    unavailable: podmanForTests,
    // An image task over a base image of this machine's packages, Node and npm among them (test/podman-attack-image.ts).
    task: async (dir) => ({ ...loadTask(dir), image: await attackBaseImage() }),
  },
];

const EXAMPLE = join(ROOT, "examples", "tasks", "fix-add");
const run = promisify(execFile);

/** A gateway as `rlgate run` meets it: its own (a control token only the runner holds), or a --gateway without one. */
interface Target {
  name: string;
  start(): Promise<{ url: string; token?: string; grpcPort?: number; close(): Promise<void> }>;
}

const TARGETS: Target[] = [
  {
    name: "its own gateway (a control token the sandbox never sees)",
    start: async () => {
      // Its store in a temporary folder (rlgate run keeps one under .rlgate/runs), removed with it.
      const g: RunGateway = await startRunGateway({ prompts: "messages", data: tempDir("attack-store") });
      const close = async () => {
        await g.close();
        rmSync(g.dataDir, { recursive: true, force: true });
      };
      return { url: g.url, token: g.token, close };
    },
  },
  {
    name: "a --gateway without --token (the bridge and the gateway's path rules alone)",
    start: async () => {
      const s: Stack = await startStack({ gateway: { grpcPort: 0 } });
      return { url: s.gateway.url, grpcPort: s.gateway.grpc!.port, close: s.close };
    },
  },
];

for (const backend of BACKENDS) {
  const why = backend.unavailable();
  describe(
    `sandbox attacks: ${backend.kind}`,
    { skip: why ? `${backend.kind} sandboxes cannot start here: ${why}` : false },
    () => {
      let work: string;
      before(() => {
        work = tempDir("attacks-work");
        chmodSync(work, 0o755);
      });
      after(() => rmSync(work, { recursive: true, force: true }));

      for (const target of TARGETS)
        test(`${target.name}: every way out is refused, and the gateway holds the grader's reward`, async (t) => {
          const gw = await target.start();
          try {
            const api = async (method: string, path: string, body?: unknown): Promise<any> => {
              const res = await fetch(`${gw.url}${path}`, {
                method,
                headers: {
                  "content-type": "application/json",
                  ...(gw.token ? { authorization: `Bearer ${gw.token}` } : {}),
                },
                body: body === undefined ? undefined : JSON.stringify(body),
              });
              assert.ok(res.ok, `${method} ${path}: ${res.status}`);
              return res.json();
            };
            // Another rollout whose id the agent has learned.
            const victim = await api("POST", "/api/rollouts", { group: "victim", task: "victim", harness: "x" });
            const results = await runTasks({
              tasks: [await backend.task(EXAMPLE)],
              harness: resolveHarness(ATTACK_AGENT),
              n: 1,
              concurrency: 1,
              timeoutSec: 300,
              gatewayUrl: gw.url,
              token: gw.token,
              limits: DEFAULT_LIMITS,
              workDir: work,
              sandbox: backend.kind,
              env: {
                VICTIM: victim.id,
                GATEWAY_PORT: new URL(gw.url).port,
                GRPC_PORT: String(gw.grpcPort ?? 1),
              },
            });
            const r: RolloutResult = results[0]!;
            assert.equal(r.status, "ok", r.error ?? "");
            assert.equal(r.recorded, true, r.error ?? "");
            assert.equal(r.reward, 0, "calc.py is left as it is: the grader's reward is 0");

            const rollout = await api("GET", `/api/rollouts/${r.rolloutId}`);
            const log: string = rollout.metadata.runner.logs.agent;
            assert.equal(rollout.status, "ok");
            assert.equal(rollout.reward, 0, "the reward the gateway holds is the grader's");
            assert.match(log, /^legit 200$/m, log);
            assert.match(log, /^legit-header 200$/m, log);

            const probes = [...log.matchAll(/^probe (\S+) (\d{3})$/gm)].map((m) => [m[1]!, m[2]!] as const);
            const count = Number(/^probes (\d+)$/m.exec(log)?.[1]);
            assert.ok(count > 200, log.slice(-2000));
            assert.equal(probes.length, count, "every probe's line is in the log");
            const byCode = new Map<string, number>();
            for (const [, code] of probes) byCode.set(code, (byCode.get(code) ?? 0) + 1);
            t.diagnostic(`${count} probes: ${[...byCode].map(([code, k]) => `${k} × ${code}`).join(", ")}`);
            const through = probes.filter(([, code]) => !REFUSED.has(code));
            assert.deepEqual(through, [], `not refused:\n${through.map((p) => p.join(" ")).join("\n")}`);
            assert.equal(r.calls, 2, "the two legitimate calls are the rollout's only calls");

            // No secret of rlgate's is in the sandbox: neither the control token nor any rollout key.
            assert.match(log, /^env RLGATE_ROLLOUT_ID=/m, log);
            if (gw.token) assert.ok(!log.includes(gw.token), "the control token is not in the sandbox");
            assert.doesNotMatch(log, /rlk_/, "no rollout key is in the sandbox");

            const other = await api("GET", `/api/rollouts/${victim.id}`);
            assert.equal(other.status, "open", "the other rollout was not finished");
            assert.equal(other.calls ?? 0, 0, "nor called");
            const listed = await api("GET", "/api/rollouts?limit=100");
            const rollouts: any[] = listed.rollouts ?? listed.data ?? listed;
            assert.deepEqual(
              rollouts.map((x) => x.id).sort(),
              [r.rolloutId, victim.id].sort(),
              "no rollout was created from inside",
            );
          } finally {
            await gw.close();
          }
        });

      test("start-up hooks an agent plants (HOME, /tmp, workspace, git) never run in grading: the reward is the grader's", async () => {
        const gw = await TARGETS[0]!.start();
        try {
          const dir = join(work, "hooks-task");
          cpSync(EXAMPLE, dir, { recursive: true });
          writeFileSync(
            join(dir, "task.json"),
            JSON.stringify({ verifier: HOOK_VERIFIER, tests_dir: "tests", verifier_timeout: 120 }),
          );
          const [r] = await runTasks({
            tasks: [await backend.task(dir)],
            harness: resolveHarness(HOOK_AGENT),
            n: 1,
            concurrency: 1,
            timeoutSec: 300,
            gatewayUrl: gw.url,
            token: gw.token,
            limits: DEFAULT_LIMITS,
            workDir: work,
            sandbox: backend.kind,
          });
          const res = await fetch(`${gw.url}/api/rollouts/${r!.rolloutId}`, {
            headers: { authorization: `Bearer ${gw.token}` },
          });
          const { metadata, reward } = (await res.json()) as any;
          const { agent, grade } = metadata.runner.logs as { agent: string; grade: string };
          // Each hook was live where the agent planted it…
          for (const line of [
            "agent-python=0",
            "agent-workspace-site=0",
            "agent-login-shell=0",
            "agent-npmrc=planted",
            "agent-npmrc-hidden=planted",
            "agent-git-fsmonitor=ran",
          ])
            assert.match(agent, new RegExp(`^${line}$`, "m"), agent);
          // …and none of them ran in grading, which started from an empty HOME and /tmp and no start-up variables.
          assert.doesNotMatch(grade, /HOOK RAN/, grade);
          assert.match(grade, /^home=0 tmp=0$/m, grade);
          assert.doesNotMatch(grade, /startup-env/, grade);
          assert.match(
            grade,
            /^verifier python=1 pytest=([1-9]\d*|absent) login-shell=1 node=1 npmrc=(null|undefined)? npmrc-hidden=(null|undefined)?$/m,
            grade,
          );
          assert.equal(r!.status, "ok", r!.error ?? "");
          assert.equal(r!.reward, 0, grade);
          assert.equal(reward, 0);
        } finally {
          await gw.close();
        }
      });
    },
  );
}

describe("the gateway rlgate run starts, as if a path slipped past the bridge", () => {
  test("the same tries sent straight to it, without the control token only the runner holds, are all refused", async (t) => {
    const gw = await startRunGateway({ prompts: "messages", data: tempDir("attack-store") });
    try {
      const created = await fetch(`${gw.url}/api/rollouts`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${gw.token}` },
        body: JSON.stringify({ group: "g", task: "t", harness: "h" }),
      });
      const own = (await created.json()) as { id: string };
      const victim = (await (
        await fetch(`${gw.url}/api/rollouts`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${gw.token}` },
          body: JSON.stringify({ group: "victim", task: "t", harness: "h" }),
        })
      ).json()) as { id: string };
      const { stdout } = await run("bash", ["-c", ATTACK_AGENT], {
        env: {
          PATH: process.env["PATH"],
          ATTACK_ORIGIN: gw.url,
          ATTACK_HTTP_ONLY: "1",
          RLGATE_ROLLOUT_ID: own.id,
          VICTIM: victim.id,
        },
        maxBuffer: 1 << 22,
      });
      const probes = [...stdout.matchAll(/^probe (\S+) (\d{3})$/gm)].map((m) => [m[1]!, m[2]!] as const);
      assert.equal(probes.length, Number(/^probes (\d+)$/m.exec(stdout)?.[1]));
      const byCode = new Map<string, number>();
      for (const [, code] of probes) byCode.set(code, (byCode.get(code) ?? 0) + 1);
      t.diagnostic(`${probes.length} probes: ${[...byCode].map(([code, k]) => `${k} × ${code}`).join(", ")}`);
      // The live UI's static files are public by design (its data comes from /api, behind the token): /ui itself
      // answers here; spelled any other way, it is refused like the rest.
      const through = probes.filter(([name, code]) => !REFUSED.has(code) && name !== "ui:direct");
      assert.deepEqual(through, [], `not refused:\n${through.map((p) => p.join(" ")).join("\n")}`);
    } finally {
      await gw.close();
      rmSync(gw.dataDir, { recursive: true, force: true });
    }
  });
});
