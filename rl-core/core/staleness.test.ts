// The version numbers staleness counts by, the current version (raised by rollouts, named by a trainer's resumes), and
// a row's runs after its stale tokens left the loss.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CurrentVersion, versionNumber } from "./policy-version.ts";
import { trainedRuns, isStale, rowStaleness, rowVersions } from "./staleness.ts";

test("a version has a number only when the number is all it says", () => {
  const named = ["42", "v42", "step-42", "ckpt_0003", "0"];
  assert.deepEqual(named.map(versionNumber), [42, 42, 42, 3, 0]);
  // v2.0 is not older than v1.9 by "the number it ends with"; a git hash's last digit is no order; nor a 7b in a name.
  const unnumbered = ["v2.0", "v1.9", "3f2a9c1", "deadbee7", "ckpt_7b_0003", "", "main", "9".repeat(20)];
  assert.deepEqual(unnumbered.map(versionNumber), Array(unnumbered.length).fill(null));
});

function tracked(stored: string) {
  const saved: string[] = [];
  const lowered: string[] = [];
  const current = new CurrentVersion(stored, {
    save: (v) => void saved.push(v),
    onLowered: (from, to) => lowered.push(`${from}->${to}`),
  });
  return { current, saved, lowered };
}

test("rollouts raise the current version, never lower it, and it keeps the string it was named by", () => {
  const { current, saved } = tracked("step-3");
  assert.equal(current.observe(["step-2", "main", "", "v2.0"]), false);
  assert.equal(current.observe(["v4", "step-5", "1"]), true);
  assert.deepEqual([current.version, current.number, saved], ["step-5", 5, ["step-5"]]);
});

test("a trainer's resume is current even when lower; rollouts no longer raise it after one", () => {
  const { current, saved, lowered } = tracked("step-50");
  current.resume("step-10"); // restarted from an older checkpoint
  assert.deepEqual([current.version, current.number, current.lowered], ["step-10", 10, 1]);
  assert.deepEqual(lowered, ["step-50->step-10"]);
  // A late rollout of the abandoned run does not take it back up.
  assert.equal(current.observe(["step-49", "step-50"]), false);
  assert.equal(current.version, "step-10");
  current.resume("step-11");
  current.resume("step-11");
  assert.equal(current.lowered, 1, "rising or repeating is no lowering");
  // A trainer that names versions by git hash: current, unnumbered, so nothing is judged against it.
  current.resume("3f2a9c1");
  assert.deepEqual([current.version, current.number, current.lowered], ["3f2a9c1", null, 2]);
  assert.deepEqual(saved, ["step-10", "step-11", "3f2a9c1"]);
});

test("a mistyped high version is undone by the next resume", () => {
  const { current } = tracked("");
  current.observe(["1000"]); // a rollout's header said 1000 for 10
  current.resume("11");
  assert.deepEqual([current.version, current.number, current.lowered], ["11", 11, 1]);
});

test("saved() settles once every write of a version set so far is done", async () => {
  const writes: Array<() => void> = [];
  const current = new CurrentVersion("", { save: () => new Promise<void>((resolve) => writes.push(resolve)) });
  current.resume("1");
  current.resume("2");
  let settled = false;
  const saved = current.saved().then(() => (settled = true));
  await new Promise((r) => setImmediate(r));
  assert.equal(settled, false, "writes pending");
  writes[0]!();
  await new Promise((r) => setImmediate(r));
  assert.equal(settled, false, "one write still pending");
  writes[1]!();
  await saved;
});

test("stale: older than current − K, never when unnumbered or before any version", () => {
  const rule = { maxStaleness: 2, mode: "keep" as const, current: 5 };
  assert.deepEqual(
    ["2", "3", "5", "x", null].map((v) => isStale(v, rule)),
    [true, false, false, false, false],
  );
  assert.equal(isStale("0", { ...rule, current: null }), false);
});

test("a row's versions, staleness, and its runs re-counted over the tokens still trained", () => {
  const calls = [
    {
      seq: 1,
      policyVersion: "1",
      finishReason: "stop",
      versionRuns: [
        { start: 0, version: "1" },
        { start: 2, version: "4" },
      ],
    },
    { seq: 2, policyVersion: "4", finishReason: "stop" },
  ];
  const callIndex = Int32Array.from([-1, 0, 0, 0, 0, -1, 1]);
  const mask = Uint8Array.from([0, 1, 1, 1, 1, 0, 1]);
  const versions = rowVersions(calls, callIndex, mask);
  assert.deepEqual(versions, [null, "1", "1", "4", "4", null, "4"]);
  const rule = { maxStaleness: 2, mode: "mask" as const, current: 4 };
  assert.deepEqual(rowStaleness(versions, mask, rule), { staleness: 3, staleTokens: 2 });
  const masked = Uint8Array.from(mask, (m, t) => (m && isStale(versions[t]!, rule) ? 0 : m));
  const after = trainedRuns(calls, callIndex, versions, masked);
  assert.deepEqual(after[0]!.versionRuns, [{ start: 0, version: "4" }]);
  assert.equal(after[1], calls[1], "a call without runs is left as it is");
  assert.deepEqual(rowStaleness(rowVersions(after, callIndex, masked), masked, rule), { staleness: 0, staleTokens: 0 });
});
