// Where `rlgate run --branch` starts branches (runner/branch-points.ts): parsed --branch-at, the calls that count,
// entropy ranking by the sampled tokens' surprisal, uniform spreading, given calls cycled to K, refusals.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  BranchPointError,
  branchPoints,
  callSurprisal,
  parseBranchAt,
  pickBranchPoints,
  type RecordedCall,
} from "../runner/branch-points.ts";

const call = (seq: number, logprobs: number[] | null, status = "ok"): RecordedCall => ({
  seq,
  status,
  prompt_token_ids: [1, 2],
  choices: [{ token_ids: (logprobs ?? [0]).map(() => 5), logprobs }],
});

describe("branch points", () => {
  test("--branch-at parses entropy, uniform and calls=i,j; anything else is refused with the forms", () => {
    assert.deepEqual(parseBranchAt("entropy"), { kind: "entropy" });
    assert.deepEqual(parseBranchAt("uniform"), { kind: "uniform" });
    assert.deepEqual(parseBranchAt("calls=3,0"), { kind: "calls", calls: [3, 0] });
    assert.deepEqual(parseBranchAt("tokens:entropy"), { kind: "token-entropy" });
    assert.deepEqual(parseBranchAt("tokens:uniform"), { kind: "token-uniform" });
    assert.deepEqual(parseBranchAt("tokens=1:5,0:2"), {
      kind: "tokens",
      points: [
        { call: 1, token: 5 },
        { call: 0, token: 2 },
      ],
    });
    for (const bad of ["calls=", "calls=a", "random", "calls=1,,2", "tokens=1", "tokens:random"])
      assert.throws(() => parseBranchAt(bad), /entropy, uniform, calls=i,j, tokens:entropy/);
  });

  test("entropy: the calls whose sampled tokens were least likely, in call order; failed calls do not count", () => {
    // Listed out of order, with a failed call (not a position) between: positions follow seq among ok calls.
    const calls = [call(40, [-0.1, -0.1]), call(10, [-2, -4]), call(25, [-9], "upstream_error"), call(30, [-1])];
    assert.equal(callSurprisal(calls[1]!), 3);
    assert.deepEqual(pickBranchPoints(calls, 2, { kind: "entropy" }), [0, 1]);
    assert.deepEqual(pickBranchPoints(calls, 1, { kind: "entropy" }), [0]);
    // More branches than calls: the ranking is cycled (more samples at the most uncertain points).
    assert.deepEqual(pickBranchPoints(calls, 4, { kind: "entropy" }), [0, 0, 1, 2]);
    assert.equal(callSurprisal(call(1, null)), 0, "a call without logprobs ranks last");
  });

  test("uniform spreads the points over the calls; calls= are taken as given and cycled to K", () => {
    const calls = Array.from({ length: 10 }, (_, i) => call(i, [-1]));
    assert.deepEqual(pickBranchPoints(calls, 2, { kind: "uniform" }), [2, 7]);
    assert.deepEqual(pickBranchPoints(calls, 5, { kind: "uniform" }), [1, 3, 5, 7, 9]);
    assert.deepEqual(pickBranchPoints(calls.slice(0, 2), 3, { kind: "uniform" }), [0, 0, 1]);
    assert.deepEqual(pickBranchPoints(calls.slice(0, 3), 5, { kind: "uniform" }), [0, 0, 1, 1, 2]);
    assert.deepEqual(pickBranchPoints(calls, 3, { kind: "calls", calls: [4, 1] }), [1, 4, 4]);
  });

  test("a point past the calls, or a backbone without calls, is refused with a sentence", () => {
    const calls = [call(1, [-1]), call(2, [-1])];
    assert.throws(() => pickBranchPoints(calls, 1, { kind: "calls", calls: [2] }), BranchPointError);
    assert.throws(() => pickBranchPoints([], 1, { kind: "entropy" }), /no call that ended ok/);
  });

  test("token positions: the least likely sampled tokens of calls served from tokens, spread, or as given", () => {
    const tokens = (seq: number, logprobs: number[]) => ({ ...call(seq, logprobs), prompt: { mode: "tokens" } });
    // Call 1 was served as messages (a fallback): its tokens are no candidates, however unlikely.
    const calls = [tokens(1, [-0.1, -3, -0.2]), call(2, [-9, -9]), tokens(3, [-1, -0.5, -4, -0.1])];
    assert.deepEqual(branchPoints(calls, 2, { kind: "token-entropy" }), [
      { call: 0, token: 1 },
      { call: 2, token: 2 },
    ]);
    // 7 candidates, 3 points: the 1st, 4th and 6th (middles of three equal spans).
    assert.deepEqual(branchPoints(calls, 3, { kind: "token-uniform" }), [
      { call: 0, token: 1 },
      { call: 2, token: 0 },
      { call: 2, token: 2 },
    ]);
    assert.deepEqual(branchPoints(calls, 3, { kind: "tokens", points: [{ call: 2, token: 3 }] }).length, 3);
    assert.deepEqual(branchPoints(calls, 1, { kind: "entropy" }), [{ call: 1 }], "call points stay whole calls");
    assert.throws(
      () => branchPoints(calls, 1, { kind: "tokens", points: [{ call: 1, token: 0 }] }),
      /--prompts tokens/,
    );
    assert.throws(
      () => branchPoints(calls, 1, { kind: "tokens", points: [{ call: 0, token: 3 }] }),
      /past the 3 token/,
    );
    assert.throws(() => branchPoints([call(1, [-1])], 1, { kind: "token-entropy" }), /no backbone call was served/);
  });

  test("recorded entropies (top logprobs) rank calls and tokens before the sampled tokens' surprisal", () => {
    const a = { ...call(1, [-0.1, -0.1]), prompt: { mode: "tokens" } };
    const b = { ...call(2, [-5, -5]), prompt: { mode: "tokens" } };
    a.choices[0]!.entropies = [2, 0.5];
    b.choices[0]!.entropies = [0.1, 0.2];
    assert.equal(callSurprisal(a), 1.25);
    assert.deepEqual(pickBranchPoints([a, b], 1, { kind: "entropy" }), [0]);
    assert.deepEqual(branchPoints([a, b], 1, { kind: "token-entropy" }), [{ call: 0, token: 0 }]);
  });
});
