import assert from "node:assert/strict";
import { test } from "node:test";
import { exportFormat } from "./export-command.ts";

test("export format: --format wins, else an -o name ending .parquet or .pq is Parquet, else JSONL", () => {
  assert.equal(exportFormat(undefined, undefined), "jsonl");
  assert.equal(exportFormat(undefined, "out.jsonl"), "jsonl");
  assert.equal(exportFormat(undefined, "runs/out.parquet"), "parquet");
  assert.equal(exportFormat(undefined, "OUT.PQ"), "parquet");
  assert.equal(exportFormat(undefined, "out.parquet.bak"), "jsonl");
  assert.equal(exportFormat("jsonl", "out.parquet"), "jsonl");
  assert.equal(exportFormat("parquet", "out.bin"), "parquet");
});
