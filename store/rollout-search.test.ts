// The by-time index's search fields: cursors that name a page's last row, and entries written before the index held
// fields (value `true`) searched through their records.
import assert from "node:assert/strict";
import { test } from "node:test";
import { decodeCursor, encodeCursor, entryMatches } from "./rollout-search.ts";
import { testRolloutRecord } from "./test-support.ts";

test("a cursor names its row exactly, ids with dots included; anything else is no cursor", () => {
  assert.deepEqual(decodeCursor(encodeCursor([1_767_225_600_000, "r.1.x"])), [1_767_225_600_000, "r.1.x"]);
  for (const bad of ["", "nonsense", ".r", "12x.r", "-1.r"]) assert.equal(decodeCursor(bad), null, bad);
});

test("an entry written before the index held fields is matched through its record", () => {
  const record = testRolloutRecord({ id: "old-1", group: "Legacy", harness: "codex", status: "ok" });
  let reads = 0;
  const read = () => (reads++, record);
  assert.equal(entryMatches("old-1", true, { query: "legacy" }, read), true);
  assert.equal(entryMatches("old-1", true, { status: "open" }, read), false);
  assert.equal(reads, 2);
  assert.equal(entryMatches("new-1", ["open", "g", "qwen-code", "fix it"], { query: "FIX" }, read), true);
  assert.equal(entryMatches("new-1", ["open", "g", "qwen-code", null], { group: "G" }, read), false);
  assert.equal(reads, 2, "entries with fields read no record");
});
