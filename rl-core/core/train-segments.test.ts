import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { trainedRows } from "./train-segments.ts";

const delivered = { segments: ["auxiliary", "main", "sub_agent", "compaction"], trained: Uint8Array.of(0, 1, 0, 0) };

describe("rows a core trains", () => {
  test("without --train-segments: the gateway's flags", () => {
    assert.deepEqual([...trainedRows(delivered, {}, undefined)], [0, 1, 0, 0]);
  });
  test("--train-segments main,sub_agent,compaction: the core's choice", () => {
    assert.deepEqual([...trainedRows(delivered, {}, ["main", "sub_agent", "compaction"])], [0, 1, 1, 1]);
  });
  test("a rollout whose metadata names train_segments keeps the gateway's flags (made from them)", () => {
    assert.deepEqual([...trainedRows(delivered, { train_segments: ["main"] }, ["sub_agent"])], [0, 1, 0, 0]);
  });
});
