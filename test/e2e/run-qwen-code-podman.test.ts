// End to end over podman: `rlgate run --sandbox podman` with the real Qwen Code CLI, n = 4 rollouts of the example task
// as an image task (FROM a base image built from this machine's Debian packages, no registry), the sim scripted to fix
// the bug in rollouts 0 and 1 and to overwrite the test file in 2 and 3. Rewards 1, 1, 0, 0, read from the grader's
// result file; every call captured through the bridge; one trajectory per rollout.
import assert from "node:assert/strict";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startGateway, type Gateway } from "../../gateway/index.ts";
import { resolveHarness } from "../../runner/harnesses.ts";
import { ensureHostImage } from "../../runner/podman-host-image.ts";
import type { RolloutResult } from "../../runner/rollout.ts";
import { runTasks } from "../../runner/run.ts";
import { DEFAULT_LIMITS } from "../../runner/sandbox.ts";
import { loadTask } from "../../runner/task.ts";
import { loadScript, startSim, type SimServer } from "../../sim/index.ts";
import { ROOT, tempDir } from "../helpers.ts";
import { rolloutDiagnosis } from "./runner-support.ts";
import { podmanForTests, requireInCi } from "../require-in-ci.ts";

const TASK = join(ROOT, "examples", "tasks", "fix-add");
const unavailable = podmanForTests();
const skip = !existsSync(join(ROOT, "node_modules", "@qwen-code", "qwen-code", "cli.js"))
  ? requireInCi("the qwen CLI (npm install)", "qwen binary absent; run npm install")
  : unavailable
    ? `podman cannot run containers here: ${unavailable}`
    : false;

describe("rlgate run --sandbox podman: Qwen Code in containers, graded from the result file", { skip }, () => {
  let sim: SimServer;
  let gateway: Gateway;
  let results: RolloutResult[];
  const dirs = { data: tempDir("run-podman-store"), work: tempDir("run-podman-work") };

  before(async () => {
    const image = await ensureHostImage();
    sim = await startSim({ port: 0, script: loadScript(join(TASK, "sim-qwen-code.json")) });
    gateway = await startGateway({ upstream: sim.url, port: 0, grpcPort: null, dataDir: dirs.data });
    results = await runTasks({
      tasks: [{ ...loadTask(TASK), image, workdir: "/testbed" }],
      sandbox: "podman",
      harness: resolveHarness("qwen-code"),
      n: 4,
      concurrency: 2,
      timeoutSec: 150,
      gatewayUrl: gateway.url,
      limits: DEFAULT_LIMITS,
      workDir: dirs.work,
      env: { QWEN_CODE_NO_RELAUNCH: "1" },
    });
  });
  after(async () => {
    await gateway?.close();
    await sim?.close();
    for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
  });

  test("rollouts 0 and 1 fix the bug (reward 1), 2 and 3 tamper with the tests (reward 0); one trajectory each", async () => {
    assert.equal(results.length, 4);
    for (const r of results) {
      const diag = await rolloutDiagnosis(gateway.url, r);
      assert.equal(r.status, "ok", diag);
      assert.equal(r.reward, r.sample < 2 ? 1 : 0, diag);
      assert.ok(r.calls >= 2, `qwen made its calls through the bridge: ${diag}`);
      assert.equal(r.trajectories, 1, diag);
      const logs = ((await (await fetch(`${gateway.url}/api/rollouts/${r.rolloutId}`)).json()) as any).metadata.runner
        .logs;
      // The grader ran the hidden test in the image's workdir, as the container user.
      assert.match(logs.grade, r.sample < 2 ? /add: ok/ : /AssertionError|Error/, diag);
    }
  });
});
