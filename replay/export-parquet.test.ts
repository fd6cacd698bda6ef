// The Parquet sink on rows the sim does not produce: logprobs the upstream did not send (null elements), float32
// edge values, null scalars, flagged rows; and a failed export leaves no file behind.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { duckdbRows, hyparquetRows } from "../test/parquet-readers.ts";
import type { ExportRow } from "./export.ts";
import { ParquetSink } from "./export-parquet.ts";

const tempDir = (prefix: string) => mkdtempSync(join(tmpdir(), `rlgate-${prefix}-`));

function row(over: Partial<ExportRow>): ExportRow {
  const token_ids = over.token_ids ?? [151644, 872, 198, 0, 2147483647];
  return {
    rollout_id: "r_1",
    trajectory_index: 0,
    trajectory_id: "r_1:5:0",
    group: "g",
    task: "t",
    harness: "h",
    policy_version: null,
    status: "ok",
    reward: 1,
    segment: "main",
    segment_id: 0,
    trained: true,
    flagged: false,
    flag_reasons: [],
    num_tokens: token_ids.length,
    token_ids,
    loss_mask: token_ids.map((_, i) => (i >= 3 ? 1 : 0)),
    logprobs: token_ids.map((_, i) => (i >= 3 ? -0.5 : 0)),
    advantages: null,
    spans: [{ start: 3, end: token_ids.length, call_seq: 1796136073308001, choice_index: 0, kind: "main" }],
    breaks: 0,
    version_runs: [
      { start: 0, version: null },
      { start: 3, version: "0" },
      { start: 4, version: "1" },
    ],
    ...over,
  };
}

const TINY = 1.401298464324817e-45; // the smallest float32 subnormal
const rows: ExportRow[] = [
  row({}),
  row({
    rollout_id: "r_2",
    trajectory_id: "r_2:9:1",
    trajectory_index: 2,
    group: null,
    task: null,
    harness: null,
    policy_version: "step-3",
    status: "infra_error",
    reward: null,
    segment: "sub_agent",
    trained: false,
    flagged: true,
    flag_reasons: ["no logprobs: calls 9", "main agent unclear"],
    token_ids: [1, 2, 3, 4, 5, 6],
    loss_mask: [0, 0, 1, 1, 1, 0],
    logprobs: [0, 0, null, null, -TINY, -88.72283935546875],
    spans: [],
    breaks: 2,
    version_runs: [{ start: 0, version: null }],
    // MoE routing replay: [6 tokens × 1 layer × 2 experts], uint16 values, the last token's 0.
    routed_experts: [0, 1, 2, 3, 299, 300, 65535, 7, 8, 9, 0, 0],
    moe_layers: 1,
    moe_top_k: 2,
  }),
  row({
    rollout_id: "r_3",
    trajectory_id: "r_3:1:0",
    token_ids: [],
    loss_mask: [],
    logprobs: [],
    spans: [],
    version_runs: [],
  }),
];

test("null logprobs, float32 edge values, null scalars and an empty trajectory read back the same in both readers", async () => {
  const path = join(tempDir("parquet-sink"), "x.parquet");
  const sink = await ParquetSink.open(path, { rowGroupTokens: 6 });
  await sink.write(rows);
  const { bytes } = await sink.finish();
  assert.ok(bytes > 0);
  // 5 tokens, then 11 reach the budget of 6: rows 1–2 make one row group, the empty row another.
  assert.equal(sink.rowGroups, 2);
  const expected = rows.map((r) => ({
    routed_experts: null,
    moe_layers: null,
    moe_top_k: null,
    ...r,
    spans: r.spans.map((s) => ({ ...s, call_seq: BigInt(s.call_seq) })),
  }));
  assert.deepEqual(await hyparquetRows(path), expected);
  const duck = await duckdbRows(path);
  assert.deepEqual(
    duck.map((r) => ({ ...r, spans: r["spans"].map((s: any) => ({ ...s, call_seq: BigInt(s.call_seq) })) })),
    expected,
  );
  assert.deepEqual(duck[1]!["logprobs"], [0, 0, null, null, -TINY, -88.72283935546875]);
});

test("an aborted export leaves neither the file nor its partial twin", async () => {
  const dir = tempDir("parquet-abort");
  const path = join(dir, "x.parquet");
  const sink = await ParquetSink.open(path, { rowGroupTokens: 1 });
  await sink.write(rows.slice(0, 1));
  assert.equal(readdirSync(dir).length, 1, "the partial file is written beside the destination");
  await sink.abort();
  assert.equal(existsSync(path), false);
  assert.deepEqual(readdirSync(dir), []);
});
