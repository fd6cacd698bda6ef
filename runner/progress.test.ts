import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { test } from "node:test";
import { Progress, summaryTable } from "./progress.ts";
import type { RolloutResult } from "./rollout.ts";

function result(over: Partial<RolloutResult>): RolloutResult {
  return {
    task: "t",
    sample: 0,
    rolloutId: "r_1",
    harness: "qwen-code",
    status: "ok",
    reward: 1,
    calls: 3,
    trajectories: 1,
    seconds: 12.34,
    stage: "done",
    error: null,
    recorded: true,
    ...over,
  };
}

test("the summary table: one row per rollout, aligned, with counts by status and the mean reward of graded rollouts", () => {
  const table = summaryTable([
    result({}),
    result({ sample: 1, rolloutId: "r_2", reward: 0 }),
    result({
      sample: 2,
      rolloutId: "r_3",
      status: "infra_error",
      reward: null,
      calls: 0,
      trajectories: null,
      seconds: 1,
    }),
  ]);
  assert.equal(
    table,
    [
      "task  rollout  harness    status       reward  calls  trajectories  seconds",
      "t#0   r_1      qwen-code  ok           1       3      1             12.3",
      "t#1   r_2      qwen-code  ok           0       3      1             12.3",
      "t#2   r_3      qwen-code  infra_error  -       0      -             1.0",
      "3 rollouts: 2 ok, 1 infra_error; mean reward 0.500",
    ].join("\n"),
  );
});

test("a rollout whose result the gateway does not hold: a recorded column, a last line naming it, and its progress line", () => {
  const forged = result({
    sample: 1,
    rolloutId: "r_2",
    reward: 0,
    stage: "finish",
    error: "finishing on the gateway failed (it holds status ok, reward 1): 400 already finished",
    recorded: false,
  });
  assert.equal(
    summaryTable([result({}), forged]),
    [
      "task  rollout  harness    status  reward  recorded  calls  trajectories  seconds",
      "t#0   r_1      qwen-code  ok      1       yes       3      1             12.3",
      "t#1   r_2      qwen-code  ok      0       NO        3      1             12.3",
      "2 rollouts: 2 ok; mean reward 0.500",
      "1 NOT RECORDED: the gateway does not hold the result above (t#1; see their error in --json)",
    ].join("\n"),
  );
  let text = "";
  const out = new Writable({
    write: (chunk, _enc, done) => ((text += chunk), done()),
  }) as unknown as NodeJS.WriteStream;
  const progress = new Progress(1, out);
  progress.events().done!({ task: "t", sample: 1 }, forged);
  progress.close();
  assert.match(
    text,
    /^t#1: ok reward=0 NOT RECORDED calls=3 12\.3 s \[1\/1\] \(finish: finishing on the gateway failed/,
  );
});

test("progress off a terminal: a plain line per stage and per finished rollout, with the failed stage's reason", () => {
  let text = "";
  const out = new Writable({
    write: (chunk, _enc, done) => ((text += chunk), done()),
  }) as unknown as NodeJS.WriteStream;
  const progress = new Progress(2, out);
  const events = progress.events();
  events.stage!({ task: "t", sample: 0 }, "agent");
  events.done!(
    { task: "t", sample: 0 },
    result({
      status: "infra_error",
      reward: null,
      stage: "agent",
      error: "agent sandbox stopped: it reached the process limit\nmore",
    }),
  );
  progress.close();
  assert.equal(
    text,
    "t#0: agent\nt#0: infra_error reward=- calls=3 12.3 s [1/2] (agent: agent sandbox stopped: it reached the process limit)\n",
  );
});

test("progress on a terminal: a live line per running rollout, redrawn in place, finished ones printed above", () => {
  let text = "";
  const out = new Writable({
    write: (chunk, _enc, done) => ((text += chunk), done()),
  }) as unknown as NodeJS.WriteStream;
  out.isTTY = true;
  const progress = new Progress(2, out);
  const events = progress.events();
  events.stage!({ task: "t", sample: 0 }, "agent");
  events.stage!({ task: "t", sample: 1 }, "prepare");
  assert.match(text, /  t#0 +agent +0 s\n  t#1 +prepare +0 s\n$/);
  text = "";
  events.done!({ task: "t", sample: 0 }, result({}));
  // Erase the two live lines, print the finished rollout, draw the one still running.
  assert.ok(text.startsWith("\x1b[2A\x1b[J"), JSON.stringify(text));
  assert.match(text, /t#0: ok reward=1 calls=3 12\.3 s \[1\/2\]\n  t#1 +prepare +0 s\n$/);
  progress.close();
});

test("a branch's row is labelled with its number after its backbone's (t#0.1), not like the backbone", () => {
  const branch = { of: "r_1", atCall: 1, index: 1, onDivergence: "sample" as const, cost: null };
  const rows = summaryTable([result({}), result({ rolloutId: "r_2", branch })]).split("\n");
  assert.match(rows[1]!, /^t#0 +r_1 /);
  assert.match(rows[2]!, /^t#0\.1 +r_2 /);
});
