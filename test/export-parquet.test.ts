// `rlgate export` to Parquet: rollouts recorded through the gateway against the sim, read back by two independent
// readers (hyparquet in JS, DuckDB's C++ reader), equal the JSONL export of the same rollouts value for value.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
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
import { duckdbRows, hyparquetRows, hyparquetRowGroups } from "./parquet-readers.ts";

const cli = (args: string[]) => runCli(args);

function jsonl(path: string): any[] {
  return readFileSync(path, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
}

/** Float lists compared as float32 (the Parquet type); null (no logprob from the upstream) stays null. */
const f32 = (values: Array<number | null> | null) => values && values.map((v) => (v === null ? null : Math.fround(v)));

/** A Parquet row read back, in the JSONL row's shape, for one deepEqual against it. */
function asJsonlRow(row: Record<string, any>): Record<string, unknown> {
  return {
    ...row,
    spans: row["spans"].map((s: any) => ({ ...s, call_seq: Number(s.call_seq) })),
  };
}

describe("rlgate export --format parquet", () => {
  let stack: Stack;
  let dir: string;
  let rows: any[];
  const ids: string[] = [];
  before(async () => {
    // History repair off: the harness that drops its reasoning re-serializes its history into three trajectories.
    stack = await startStack({ sim: { script: AGENT_SCRIPT }, gateway: { repairHistory: false } });
    for (const [keep, reward, version] of [
      [true, 1, "step-7"],
      [false, 0, null],
      [true, 0.25, null],
    ] as const) {
      const rollout = await createRollout(stack.gateway.url, {
        group: "g-parquet",
        harness: "scripted",
        task: "count files",
        policy_version: version,
      });
      await playAgent(rollout.base_urls.openai, AGENT_SCRIPT.length, keep);
      await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward });
      ids.push(rollout.id);
    }
    dir = tempDir("export-parquet");
    const run = await cli([
      "export",
      "--group",
      "g-parquet",
      "--gateway",
      stack.gateway.url,
      "-o",
      join(dir, "a.jsonl"),
    ]);
    assert.equal(run.code, 0, run.stderr);
    rows = jsonl(join(dir, "a.jsonl"));
  });
  after(() => stack?.close());

  test("an -o name ending .parquet writes Parquet whose rows equal the JSONL's in hyparquet and in DuckDB", async () => {
    const out = join(dir, "a.parquet");
    const run = await cli(["export", "--group", "g-parquet", "--gateway", stack.gateway.url, "-o", out]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(readFileSync(out).subarray(0, 4).toString(), "PAR1");
    // One faithful trajectory, three from the re-serialized history, one faithful: five rows.
    assert.deepEqual(
      rows.map((r) => r.rollout_id),
      [ids[0], ids[1], ids[1], ids[1], ids[2]],
    );
    const expected = rows.map((r) => ({ ...r, logprobs: f32(r.logprobs) }));
    const js = (await hyparquetRows(out)).map(asJsonlRow);
    const duck = (await duckdbRows(out)).map(asJsonlRow);
    assert.deepEqual(js, expected);
    assert.deepEqual(duck, expected);
    // The columns a trainer reads, spelled out (the deepEquals above already cover every column).
    assert.deepEqual(
      duck.map((r) => [r["trajectory_index"], r["reward"], r["policy_version"]]),
      [
        [0, 1, "step-7"],
        [0, 0, null],
        [1, 0, null],
        [2, 0, null],
        [0, 0.25, null],
      ],
    );
    assert.ok(rows.every((r) => r.num_tokens === r.token_ids.length && r.num_tokens > 0));
    assert.ok(rows.every((r) => r.loss_mask.includes(1) && r.loss_mask.includes(0)));
    // The summary: rows, tokens, the file's size in bytes, seconds, where.
    const tokens = rows.reduce((n, r) => n + r.num_tokens, 0);
    const size = statSync(out).size;
    assert.match(run.stderr, new RegExp(`\\s3\\s+0\\s+5\\s+${tokens}\\s+\\d+\\s+${size}\\s+\\d+\\.\\d\\d\\s+${out}`));
    assert.match(run.stderr, /\(parquet\)/);
    // Written beside its destination and renamed into place: no partial file remains.
    assert.deepEqual(
      readdirSync(dir).filter((f) => f.includes("partial")),
      [],
    );
  });

  test("the types a trainer gets: list<int32> ids, list<uint8> mask, list<float> logprobs and advantages", async () => {
    const out = join(dir, "types.parquet");
    const run = await cli(["export", ids[0]!, "--data", stack.dataDir, "--format", "parquet", "-o", out]);
    assert.equal(run.code, 0, run.stderr);
    const { DuckDBInstance } = await import("@duckdb/node-api");
    const db = await DuckDBInstance.create(":memory:");
    const c = await db.connect();
    const described = (await c.runAndReadAll(`describe select * from '${out}'`)).getRows();
    const types = Object.fromEntries(described.map((r) => [String(r[0]), String(r[1])]));
    assert.equal(types["token_ids"], "INTEGER[]");
    assert.equal(types["loss_mask"], "UTINYINT[]");
    assert.equal(types["logprobs"], "FLOAT[]");
    assert.equal(types["advantages"], "FLOAT[]");
    assert.equal(types["reward"], "DOUBLE");
    assert.equal(types["trained"], "BOOLEAN");
    assert.equal(types["num_tokens"], "INTEGER");
    assert.equal(types["flag_reasons"], "VARCHAR[]");
    assert.match(
      types["spans"]!,
      /^STRUCT\("start" INTEGER, "end" INTEGER, call_seq BIGINT, choice_index INTEGER, kind VARCHAR\)\[\]$/,
    );
    // What a trainer computes in SQL equals what the JSONL says: trained tokens and their summed logprob.
    const [trained, lpSum] = (
      await c.runAndReadAll(
        `select sum(list_sum(loss_mask))::INTEGER, sum(list_sum(list_transform(list_zip(logprobs, loss_mask), x -> x[1] * x[2])))::DOUBLE from '${out}'`,
      )
    ).getRows()[0]!;
    const row = rows[0]!;
    assert.equal(
      trained,
      row.loss_mask.reduce((a: number, b: number) => a + b, 0),
    );
    assert.ok(
      Math.abs(
        Number(lpSum) - row.logprobs.reduce((a: number, lp: number, i: number) => a + lp * row.loss_mask[i], 0),
      ) < 1e-3,
    );
    c.closeSync();
  });

  test("--row-group-tokens bounds row groups; both readers see every row across them", async () => {
    const out = join(dir, "groups.parquet");
    const run = await cli([
      "export",
      "--group",
      "g-parquet",
      "--data",
      stack.dataDir,
      "--row-group-tokens",
      "1",
      "-o",
      out,
    ]);
    assert.equal(run.code, 0, run.stderr);
    // A budget of one token: every trajectory is its own row group.
    assert.equal(await hyparquetRowGroups(out), rows.length);
    const expected = rows.map((r) => ({ ...r, logprobs: f32(r.logprobs) }));
    assert.deepEqual((await hyparquetRows(out)).map(asJsonlRow), expected);
    assert.deepEqual((await duckdbRows(out)).map(asJsonlRow), expected);
  });

  test("an empty selection is an error and writes nothing; a selection with no trained row writes a valid empty file", async () => {
    const none = join(dir, "none.parquet");
    const empty = await cli(["export", "--group", "g-nothing", "--data", stack.dataDir, "-o", none]);
    assert.equal(empty.code, 1);
    assert.match(empty.stderr, /no finished rollout in the store at .* matches the selection/);
    assert.equal(existsSync(none), false);

    // Nothing of main is trained when only sub-agents are: --trained-only keeps no row.
    const zero = join(dir, "zero.parquet");
    const run = await cli([
      ...["export", "--group", "g-parquet", "--data", stack.dataDir, "-o", zero],
      ...["--trained-only", "--train-segments", "sub_agent"],
    ]);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(await hyparquetRows(zero), []);
    assert.deepEqual(await duckdbRows(zero), []);
    assert.match(run.stderr, /\s3\s+0\s+0\s+0\s+0\s/);
  });

  test("failures: Parquet to stdout, a directory that does not exist", async () => {
    const stdout = await cli(["export", "--group", "g-parquet", "--data", stack.dataDir, "--format", "parquet"]);
    assert.equal(stdout.code, 1);
    assert.match(stdout.stderr, /rlgate: Parquet is a binary file: name it with -o, e.g. -o rollouts.parquet/);
    assert.equal(stdout.stdout, "");
    const nodir = await cli([
      "export",
      "--group",
      "g-parquet",
      "--data",
      stack.dataDir,
      "-o",
      "/nonexistent/x.parquet",
    ]);
    assert.equal(nodir.code, 1);
    assert.match(nodir.stderr, /rlgate: cannot write \/nonexistent\/x.parquet: ENOENT/);
    const format = await cli(["export", "--group", "g", "--format", "csv", "-o", join(dir, "x.csv")]);
    assert.equal(format.code, 1);
    assert.match(format.stderr, /--format <format>' argument 'csv' is invalid. Allowed choices are jsonl, parquet/);
  });
});
