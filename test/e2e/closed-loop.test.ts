// The closed loop, small: the PyTorch trainer serves its own tiny model behind a vLLM-compatible endpoint, the gateway
// forwards the one-tool harness's calls to it and captures them, the core groups the rollouts and computes GRPO
// advantages, and the trainer takes real gradient steps on the batches and serves the new weights. The policy that
// samples is the policy that trains: at step 0 the trainer's recomputed logprobs agree with the sampling logprobs
// (Pearson r ≥ 0.999), every step is sampled by the version trained on the step before, and the mean reward rises.
// clients/python/tests/test_torch_trainer.py checks the pieces one by one.
// Needs torch under /usr/bin/python3 (Debian's python3-torch; CI installs it): skipped with the reason otherwise.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { formatFigure, runClosedLoop, torchTrainerMissing } from "../../scripts/closed-loop.ts";
import { ROOT } from "../helpers.ts";

const python = process.env["RLGATE_PYTHON"] ?? "/usr/bin/python3";
const missing = torchTrainerMissing(python);
if (missing && process.env["CI"]) throw new Error(`${missing}: CI must install them (.ci/run)`);
const skip = missing ?? false;

test(
  "the trainer's pieces pass their Python tests (padded forward, sampled = recomputed, surrogate, server)",
  {
    skip,
    timeout: 120_000,
  },
  () => {
    const run = spawnSync(python, ["-m", "unittest", "discover", "-v", "-s", "tests", "-p", "test_torch_trainer.py"], {
      cwd: join(ROOT, "clients", "python"),
      encoding: "utf8",
    });
    const out = `${run.stdout}\n${run.stderr}`;
    assert.equal(run.status, 0, out);
    assert.match(out, /Ran 7 tests/);
    assert.doesNotMatch(out, /skipped/);
  },
);

const STEPS = 16;
const WINDOW = 4;

for (const layout of ["rows", "tree"] as const) {
  test(
    `the trainer's own policy samples through the gateway, trains on the core's batches and gets better (${layout} layout)`,
    { skip, timeout: 300_000 },
    async () => {
      const result = await runClosedLoop({
        steps: STEPS,
        n: 16,
        targets: ["2718"],
        seed: 0,
        python,
        timeoutMs: 240_000,
        layout,
      });
      console.log(formatFigure(result, WINDOW));
      const { steps } = result;
      assert.equal(steps.length, STEPS);

      // The policy that sampled is the policy that trains: the same float32 logprobs before the first update.
      assert.ok(steps[0]!.pearson >= 0.999, `pearson r at step 0: ${steps[0]!.pearson}`);
      for (const s of steps) {
        assert.ok(s.pearson >= 0.999, `step ${s.step}: pearson r ${s.pearson}`);
        // On policy: step k was sampled by version k, the weights after k updates.
        assert.deepEqual(s.sampledBy, [String(s.step)]);
        // Every rollout is one trajectory: the second call's prompt continues the first call's tokens exactly.
        assert.equal(s.rollouts, 16);
        assert.equal(s.rows, s.rollouts, `step ${s.step}: one row per rollout`);
        // The trainer got the layout asked for; one trajectory per rollout shares nothing, so both hold as many.
        assert.equal(s.layout, layout);
        assert.equal(s.tokens, s.rowTokens);
        for (const l of s.loss) assert.ok(Number.isFinite(l));
      }

      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      const first = mean(steps.slice(0, WINDOW).map((s) => s.reward));
      const last = mean(steps.slice(-WINDOW).map((s) => s.reward));
      assert.ok(last >= first + 0.25, `mean reward: first ${WINDOW} steps ${first}, last ${WINDOW} steps ${last}`);
    },
  );
}
