// The version numbers staleness counts by, the current version that only rises, and a row's runs after its stale
// tokens left the loss.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CurrentVersion, versionNumber } from "./policy-version.ts";
import { trainedRuns, isStale, rowStaleness, rowVersions } from "./staleness.ts";

test("a version is the number it ends with; one without none", () => {
  assert.deepEqual(["42", "v42", "step-42", "ckpt_7b_0003", "", "main", "9".repeat(20)].map(versionNumber), [
    42,
    42,
    42,
    3,
    null,
    null,
    null,
  ]);
});

test("the current version only rises, keeps the string it was named by, and is saved when it does", () => {
  const saved: string[] = [];
  const current = new CurrentVersion("step-3", (v) => saved.push(v));
  assert.equal(current.observe(["step-2", "main", ""]), false);
  assert.equal(current.observe(["v4", "step-5", "1"]), true);
  assert.deepEqual([current.version, current.number, saved], ["step-5", 5, ["step-5"]]);
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
