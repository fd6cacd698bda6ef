// The closed loop, small: the PyTorch trainer serves its own tiny model behind a vLLM-compatible endpoint, the gateway
// forwards the one-tool harness's calls to it and captures them, the core groups the rollouts and computes GRPO
// advantages, and the trainer takes real gradient steps on the batches and serves the new weights. The policy that
// samples is the policy that trains: at step 0 the trainer's recomputed logprobs agree with the sampling logprobs
// (Pearson r ≥ 0.999), every step is sampled by the version trained on the step before, and the mean reward rises.
// The asynchronous loop: rollouts keep running while the trainer trains, each update pauses and resumes the gateway
// through the core (PausePolicy / ResumePolicy), and every trained token carries the version that sampled it.
// clients/python/tests/test_torch_trainer.py checks the pieces one by one.
// Needs torch under /usr/bin/python3 (Debian's python3-torch; CI installs it): skipped with the reason otherwise.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import {
  formatFigure,
  rewardWindows,
  runClosedLoop,
  torchTrainerMissing,
  type ClosedLoopOptions,
  type ClosedLoopResult,
} from "../../scripts/closed-loop.ts";
import { ROOT } from "../helpers.ts";
import { requireInCi } from "../require-in-ci.ts";

const python = process.env["RLGATE_PYTHON"] ?? "/usr/bin/python3";
const skip = requireInCi("python3-torch python3-grpcio python3-grpc-tools python3-numpy", torchTrainerMissing(python));

test(
  "the trainer's pieces pass their Python tests (padded forward, sampled = recomputed, surrogate, server, its process)",
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
    assert.match(out, /Ran 13 tests/);
    assert.doesNotMatch(out, /skipped/);
  },
);

const STEPS = 16;
const WINDOW = 4;

/** The bounded loop every case runs: one target, groups of 16, STEPS steps; its figure printed. */
async function smallLoop(options: Partial<ClosedLoopOptions>): Promise<ClosedLoopResult> {
  const result = await runClosedLoop({
    steps: STEPS,
    n: 16,
    targets: ["2718"],
    seed: 0,
    python,
    timeoutMs: 240_000,
    ...options,
  });
  console.log(formatFigure(result, WINDOW));
  assert.equal(result.steps.length, STEPS);
  return result;
}

/** The mean reward must rise by `by` from the first WINDOW steps to the last. */
function assertRewardRises(result: ClosedLoopResult, by: number): void {
  const { first, last } = rewardWindows(result, WINDOW);
  assert.ok(last >= first + by, `mean reward: first ${WINDOW} steps ${first}, last ${WINDOW} steps ${last}`);
}

for (const layout of ["rows", "tree"] as const) {
  test(
    `the trainer's own policy samples through the gateway, trains on the core's batches and gets better (${layout} layout)`,
    { skip, timeout: 300_000 },
    async () => {
      const result = await smallLoop({ layout });
      const { steps } = result;

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
      assertRewardRises(result, 0.25);
    },
  );
}

test(
  "asynchronous: rollouts run while the trainer trains, updates pause and resume the gateway, every token has its version",
  { skip, timeout: 300_000 },
  async () => {
    const result = await smallLoop({ async: true, lag: 1 });
    const { steps } = result;
    // Every update went through the gateway's pause and resume; no harness saw an aborted answer, none was lost.
    assert.equal(result.pauses, STEPS);
    assert.equal(result.abortsSeen, 0);
    assert.equal(result.calls, STEPS * 16 * 2);
    for (const s of steps) {
      assert.equal(s.rollouts, 16, `step ${s.step}: every rollout trained (one group a step)`);
      assert.equal(s.rows, s.rollouts, `step ${s.step}: one row per rollout, interrupted answers continued in place`);
      assert.equal(s.unversionedTokens, 0, `step ${s.step}: every trained token has a version`);
      // The versions are exact: a token they call fresh was sampled by the very weights the step starts from.
      assert.ok(s.freshMaxAbsDlogp < 1e-4, `step ${s.step}: |dlogp| on fresh tokens ${s.freshMaxAbsDlogp}`);
      // A group of step r's rollouts started at version r − lag or later; a step trains the next group to end,
      // which may be the next round's when it ended first: staleness ≤ lag + 1.
      assert.ok(s.stalenessMax <= 2, `step ${s.step}: staleness ${s.stalenessMax}`);
      for (const l of s.loss) assert.ok(Number.isFinite(l));
    }
    // Step 0 was sampled and trained by version 0.
    assert.deepEqual(steps[0]!.sampledBy, ["0"]);
    assert.ok(steps[0]!.pearson >= 0.999, `pearson r at step 0: ${steps[0]!.pearson}`);
    // Sampling overlapped training: later steps trained on tokens of the version before.
    assert.ok(
      steps.some((s) => s.staleTokens > 0),
      "no step trained a stale token",
    );
    assertRewardRises(result, 0.2);
  },
);
