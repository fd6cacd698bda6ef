// Version runs of an exported trajectory on shapes the sim does not give: a call's tokens split into two spans (shared
// and trained), an update that fell before the span's start, calls without a version, runs sliced for a response.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { CallSummary, Trajectory } from "../trajectory/index.ts";
import { sliceVersionRuns, trajectoryVersionRuns } from "./export-versions.ts";

const span = (start: number, end: number, callSeq: number, kind = "trained") => ({
  start,
  end,
  callSeq,
  choiceIndex: 0,
  kind,
});
const call = (callSeq: number, policyVersion: string | null, runs?: Array<{ start: number; version: string }>) =>
  ({ callSeq, policyVersion, ...(runs ? { policyVersions: runs } : {}) }) as unknown as CallSummary;
const trajectory = (n: number, spans: ReturnType<typeof span>[]) =>
  ({ tokenIds: new Int32Array(n), spans }) as unknown as Trajectory;

test("a call's tokens in two spans keep counting its runs; context between calls is null", () => {
  const t = trajectory(20, [span(2, 5, 1, "shared"), span(5, 9, 1), span(12, 18, 2)]);
  const calls = [
    call(1, "3", [
      { start: 0, version: "3" },
      { start: 4, version: "4" },
    ]),
    call(2, "4"),
  ];
  assert.deepEqual(trajectoryVersionRuns(t, calls), [
    { start: 0, version: null },
    { start: 2, version: "3" },
    { start: 6, version: "4" },
    { start: 9, version: null },
    { start: 12, version: "4" },
    { start: 18, version: null },
  ]);
});

test("an update at a call's 2nd token; a call without a version is null; an empty trajectory has no runs", () => {
  const t = trajectory(6, [span(0, 3, 1), span(3, 6, 2)]);
  const runs = [
    { start: 0, version: "a7" },
    { start: 1, version: "a8" },
  ];
  assert.deepEqual(trajectoryVersionRuns(t, [call(1, "a7", runs), call(2, null)]), [
    { start: 0, version: "a7" },
    { start: 1, version: "a8" },
    { start: 3, version: null },
  ]);
  assert.deepEqual(trajectoryVersionRuns(trajectory(0, []), []), []);
});

test("sliced runs are re-based at the slice and merged", () => {
  const runs = [
    { start: 0, version: null },
    { start: 4, version: "1" },
    { start: 8, version: "2" },
  ];
  assert.deepEqual(sliceVersionRuns(runs, 6, 12), [
    { start: 0, version: "1" },
    { start: 2, version: "2" },
  ]);
  assert.deepEqual(sliceVersionRuns(runs, 8, 12), [{ start: 0, version: "2" }]);
});
