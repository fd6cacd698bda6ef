// End to end: `rlgate run --harness openclaw` — the real OpenClaw CLI (chat completions) under the Node >= 24 that
// npm install put in node_modules/.openclaw, inside bubblewrap sandboxes — on the example task, n = 4, in both prompt
// modes. The sim is scripted (examples/tasks/fix-add/sim-openclaw.json) to fix the bug in rollouts 0 and 1 and to
// overwrite the test file in 2 and 3 (which grading reverts): rewards 1, 1, 0, 0; the session ends; every call is
// captured with upstream token ids; every token the model sampled is trained exactly once (OpenClaw's moving internal
// context splits the main agent's segment, which stays trained). CI installs OpenClaw with npm install: there this
// suite fails rather than skips.
import assert from "node:assert/strict";
import { chmodSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { DEFAULT_SIM_MAX_MODEL_LEN } from "../../cli/serve-command.ts";
import { startGateway, type Gateway } from "../../gateway/index.ts";
import type { PromptModeName } from "../../gateway/prompts/index.ts";
import { resolveHarness } from "../../runner/harnesses.ts";
import { OPENCLAW_MEMORY_BYTES, openclawRuntime } from "../../runner/openclaw.ts";
import type { RolloutResult } from "../../runner/rollout.ts";
import { runTasks } from "../../runner/run.ts";
import { DEFAULT_LIMITS } from "../../runner/sandbox.ts";
import { loadTask } from "../../runner/task.ts";
import { loadScript, startSim, type SimServer } from "../../sim/index.ts";
import { ROOT, tempDir } from "../helpers.ts";
import { rolloutDiagnosis, sandboxSkip } from "./runner-support.ts";

const TASK = join(ROOT, "examples", "tasks", "fix-add");
const runtime = openclawRuntime();
const skip = "error" in runtime ? runtime.error : sandboxSkip("openclaw", runtime.entry);
if (skip && process.env["CI"]) throw new Error(`${skip}: CI installs OpenClaw with npm install and runs this suite`);

for (const prompts of ["messages", "tokens"] as const satisfies readonly PromptModeName[]) {
  describe(`rlgate run: OpenClaw in sandboxes, graded (${prompts} prompts)`, { skip }, () => {
    let sim: SimServer;
    let gateway: Gateway;
    let results: RolloutResult[];
    const dirs = { data: tempDir("run-openclaw-store"), work: tempDir("run-openclaw-work") };

    before(async () => {
      chmodSync(dirs.work, 0o755);
      sim = await startSim({
        port: 0,
        maxModelLen: DEFAULT_SIM_MAX_MODEL_LEN,
        script: loadScript(join(TASK, "sim-openclaw.json")),
      });
      gateway = await startGateway({ upstream: sim.url, port: 0, grpcPort: 0, dataDir: dirs.data, prompts });
      results = await runTasks({
        tasks: [loadTask(TASK)],
        harness: resolveHarness("openclaw"),
        n: 4,
        concurrency: 2,
        timeoutSec: 240,
        gatewayUrl: gateway.url,
        limits: { ...DEFAULT_LIMITS, memoryBytes: OPENCLAW_MEMORY_BYTES },
        workDir: dirs.work,
      });
    });
    after(async () => {
      await gateway.close();
      await sim.close();
      for (const d of Object.values(dirs)) rmSync(d, { recursive: true, force: true });
    });

    const diag = (r: RolloutResult) => rolloutDiagnosis(gateway.url, r);

    test("rollouts 0 and 1 fix the bug (reward 1), 2 and 3 tamper with the tests (reward 0); the session ends", async () => {
      assert.equal(results.length, 4);
      for (const r of results) {
        assert.equal(r.status, "ok", await diag(r));
        assert.equal(r.harness, "openclaw");
        assert.equal(r.reward, r.sample < 2 ? 1 : 0, await diag(r));
        // The script's two turns: the fix, then the answer that ends the session.
        assert.equal(r.calls, 2, await diag(r));
      }
    });

    test("every call captured with upstream ids; every sampled token trained once, in the main segment", async () => {
      for (const r of results) {
        const { calls } = (await (await fetch(`${gateway.url}/api/rollouts/${r.rolloutId}/calls`)).json()) as any;
        assert.ok(
          calls.every((c: any) => c.api === "chat.completions" && c.token_source === "upstream" && c.status === "ok"),
          await diag(r),
        );
        const sampled = calls.reduce(
          (n: number, c: any) => n + c.choices.reduce((m: number, ch: any) => m + ch.token_ids.length, 0),
          0,
        );
        const rec = (await (await fetch(`${gateway.url}/api/rollouts/${r.rolloutId}/trajectories`)).json()) as any;
        const trained = rec.trajectories
          .filter((t: any) => t.trained)
          .reduce((n: number, t: any) => n + t.loss_mask.filter((m: number) => m === 1).length, 0);
        assert.ok(sampled > 0);
        assert.equal(trained, sampled, `trained ÷ sampled = ${trained}/${sampled}: ${await diag(r)}`);
        assert.ok(
          rec.trajectories.every((t: any) => t.segment === "main"),
          JSON.stringify(rec.trajectories.map((t: any) => t.segment)),
        );
      }
    });
  });
}
