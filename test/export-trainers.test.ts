// `rlgate export --format verl|openrlhf`: rollouts recorded through the gateway against the sim, exported as the
// Parquet those trainers load, read back by two independent readers (hyparquet, DuckDB) and checked against the
// plain trajectory export of the same rollouts: the split at the first trained token, the masks, the shifted
// OpenRLHF action arrays, the chat prompt verl's RLHFDataset / OpenRLHF's PromptDataset read, uids.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  AGENT_SCRIPT,
  createRollout,
  playAgent,
  postJson,
  runCli,
  startStack,
  tempDir,
  type Stack,
} from "./helpers.ts";
import { duckdbRows, hyparquetRows } from "./parquet-readers.ts";

const f32 = (values: Array<number | null>) => values.map((v) => (v === null ? null : Math.fround(v)));
const PROMPT = [
  { role: "system", content: "You are a coding agent." },
  { role: "user", content: "How many files are here?" },
];

describe("rlgate export --format verl|openrlhf", () => {
  let stack: Stack;
  let dir: string;
  let rows: any[]; // the plain export (JSONL) of the same rollouts
  const ids: string[] = [];
  before(async () => {
    // History repair off: the rollout that drops its reasoning re-serializes its history into three trajectories.
    stack = await startStack({ sim: { script: AGENT_SCRIPT }, gateway: { repairHistory: false } });
    for (const [keep, reward, round] of [
      [true, 1, 3],
      [false, 0, 3],
      [true, 0.5, null],
    ] as const) {
      const rollout = await createRollout(stack.gateway.url, {
        group: round ? "g-trainers" : null,
        harness: "scripted",
        task: "count-files",
        ...(round ? { round } : {}),
      });
      await playAgent(rollout.base_urls.openai, AGENT_SCRIPT.length, keep);
      await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward });
      ids.push(rollout.id);
    }
    dir = tempDir("export-trainers");
    const run = await runCli(["export", ...ids, "--data", stack.dataDir, "--trained-only", "-o", join(dir, "a.jsonl")]);
    assert.equal(run.code, 0, run.stderr);
    rows = readFileSync(join(dir, "a.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
  });
  after(() => stack?.close());

  const uidOf = (rolloutId: string) => (rolloutId === ids[2] ? `rollout:${ids[2]}` : "group:g-trainers@3"); // the round names the group

  test("verl: RLHFDataset's columns and the trajectory split at its first trained token", async () => {
    const out = join(dir, "verl.parquet");
    const run = await runCli(["export", ...ids, "--data", stack.dataDir, "--format", "verl", "-o", out]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /\(verl\)/);
    const js = await hyparquetRows(out);
    const duck = await duckdbRows(out);
    assert.equal(js.length, rows.length);
    assert.equal(js.length, 5); // 1 + 3 (re-serialized history) + 1
    for (const [i, row] of rows.entries()) {
      const p = row.loss_mask.indexOf(1);
      assert.ok(p > 0);
      for (const got of [js[i]!, duck[i]!]) {
        assert.equal(got["trajectory_id"], row.trajectory_id);
        assert.deepEqual([...got["prompt_ids"], ...got["response_ids"]], row.token_ids);
        assert.deepEqual(got["prompt_ids"], row.token_ids.slice(0, p));
        assert.deepEqual(got["response_mask"], row.loss_mask.slice(p));
        assert.equal(got["response_mask"][0], 1);
        assert.deepEqual(got["rollout_log_probs"], f32(row.logprobs.slice(p)));
        assert.equal(got["reward"], row.reward);
        assert.equal(got["uid"], uidOf(row.rollout_id));
        assert.equal(got["rollout_uid"], row.rollout_id);
        // verl's RLHFDataset: `prompt` chat messages (apply_chat_template), data_source, reward_model, extra_info
        assert.deepEqual(got["prompt"].slice(0, 2), PROMPT);
        assert.equal(got["data_source"], "rlgate/scripted");
        assert.equal(got["ability"], "count-files");
        assert.deepEqual(got["reward_model"], { style: "rlgate", ground_truth: "count-files" });
        assert.equal(Number(got["extra_info"].index), i);
        assert.equal(got["extra_info"].rollout_id, row.rollout_id);
        assert.equal(got["extra_info"].split, "train");
      }
    }
    // Multi-turn: the faithful rollout's three turns are one response holding the tool outputs, mask 0 inside it.
    const m: number[] = js[0]!["response_mask"];
    assert.ok(m.slice(0, m.lastIndexOf(1)).includes(0));
    // The faithful rollout's one trajectory starts training in the first call: its prompt is that call's two messages.
    assert.deepEqual(js[0]!["prompt"], PROMPT);
    const trained = rows.reduce((n, r) => n + r.loss_mask.reduce((a: number, b: number) => a + b, 0), 0);
    assert.equal(
      js.reduce((n, r) => n + r["response_mask"].reduce((a: number, b: number) => a + b, 0), 0),
      trained,
    );
    // The summary counts the written trajectories and their trained tokens.
    assert.match(run.stderr, new RegExp(`\\s3\\s+0\\s+5\\s+\\d+\\s+${trained}\\s`));
  });

  test("openrlhf: PromptDataset's columns and the sample with its action arrays shifted by one", async () => {
    const out = join(dir, "openrlhf.parquet");
    const run = await runCli(["export", ...ids, "--data", stack.dataDir, "--format", "openrlhf", "-o", out]);
    assert.equal(run.code, 0, run.stderr);
    const js = await hyparquetRows(out);
    const duck = await duckdbRows(out);
    assert.equal(js.length, rows.length);
    for (const [i, row] of rows.entries()) {
      const first = row.loss_mask.indexOf(1);
      const last = row.loss_mask.lastIndexOf(1);
      for (const got of [js[i]!, duck[i]!]) {
        assert.deepEqual(got["sequences"], row.token_ids);
        // samples_generator.py: action_mask[1:], rollout_log_probs[1:]
        assert.deepEqual(got["action_mask"], row.loss_mask.slice(1));
        assert.deepEqual(got["rollout_log_probs"], f32(row.logprobs.slice(1)));
        assert.equal(got["response_length"], last - first + 1);
        assert.equal(got["total_length"], row.token_ids.length);
        assert.deepEqual(got["input"].slice(0, 2), PROMPT);
        assert.equal(got["label"], "count-files");
        assert.equal(got["uid"], uidOf(row.rollout_id));
        assert.equal(got["reward"], row.reward);
      }
    }
  });

  test("column types a Python reader gets", async () => {
    const out = join(dir, "types.parquet");
    const run = await runCli(["export", ids[0]!, "--data", stack.dataDir, "--format", "verl", "-o", out]);
    assert.equal(run.code, 0, run.stderr);
    const { DuckDBInstance } = await import("@duckdb/node-api");
    const db = await DuckDBInstance.create(":memory:");
    const c = await db.connect();
    const described = (await c.runAndReadAll(`describe select * from '${out}'`)).getRows();
    const types = Object.fromEntries(described.map((r) => [String(r[0]), String(r[1])]));
    assert.equal(types["prompt"], 'STRUCT("role" VARCHAR, "content" VARCHAR)[]');
    assert.equal(types["prompt_ids"], "INTEGER[]");
    assert.equal(types["response_mask"], "UTINYINT[]");
    assert.equal(types["rollout_log_probs"], "FLOAT[]");
    assert.equal(types["reward"], "DOUBLE");
    assert.match(
      types["extra_info"]!,
      /^STRUCT\("index" BIGINT, rollout_id VARCHAR, trajectory_id VARCHAR, "group" VARCHAR, split VARCHAR\)$/,
    );
    c.closeSync();
  });

  test("failures: to stdout, an unknown format", async () => {
    const stdout = await runCli(["export", ids[0]!, "--data", stack.dataDir, "--format", "openrlhf"]);
    assert.equal(stdout.code, 1);
    assert.match(stdout.stderr, /--format openrlhf writes Parquet, a binary file: name it with -o/);
    const bad = await runCli(["export", ids[0]!, "--format", "trl", "-o", join(dir, "x.parquet")]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /Allowed choices are jsonl, parquet, verl, openrlhf/);
    assert.equal(existsSync(join(dir, "x.parquet")), false);
  });
});
