// Per-token policy versions in `rlgate export` files, every format: an abort-mode update falls inside an answer, and
// each format's version runs put the change where the gateway recorded it (JSONL and Parquet over the trajectory's
// positions, verl over the response, OpenRLHF over `sequences`), one run per change.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createRollout, postJson, rolloutCalls, runCli, startStack, tempDir, type Stack } from "./helpers.ts";
import { answerInFlight } from "./answer-in-flight.ts";
import { hyparquetRows } from "./parquet-readers.ts";

const jsonl = (path: string): any[] =>
  readFileSync(path, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));

/** The version of each position, from runs. */
function expand(runs: Array<{ start: number; version: string | null }>, n: number): Array<string | null> {
  return Array.from({ length: n }, (_, t) => [...runs].reverse().find((r) => r.start <= t)?.version ?? null);
}

describe("rlgate export: per-token versions after a weight update mid-answer", () => {
  let stack: Stack;
  let dir: string;
  let cut = 0;
  let sampled = 0;
  let row: any;

  before(async () => {
    stack = await startStack({ sim: { seed: 3, interTokenMs: 2 }, gateway: { prompts: "tokens" } });
    const url = stack.gateway.url;
    const rollout = await createRollout(url, { group: "g-versions", policy_version: "0" });
    const answer = await answerInFlight(url, rollout.id);
    assert.equal((await postJson(`${url}/api/policy/pause`, { mode: "abort" })).status, 200);
    assert.equal((await postJson(`${url}/api/policy/resume`, { version: "1" })).status, 200);
    await answer.rest();
    const [call] = await rolloutCalls(url, rollout.id);
    const runs = call!.policyUpdate!.versions!;
    assert.equal(runs.length, 2);
    cut = runs[1]!.start;
    sampled = call!.choices[0]!.tokenIds.length;
    assert.equal((await postJson(`${url}/api/rollouts/${rollout.id}/finish`, { reward: 1 })).status, 200);
    dir = tempDir("export-versions");
    for (const [format, file] of [
      ["jsonl", "a.jsonl"],
      ["parquet", "a.parquet"],
      ["verl", "verl.parquet"],
      ["openrlhf", "openrlhf.parquet"],
    ]) {
      const run = await runCli([
        "export",
        "--group",
        "g-versions",
        "--gateway",
        url,
        "--format",
        format!,
        "-o",
        join(dir, file!),
      ]);
      assert.equal(run.code, 0, run.stderr);
    }
    [row] = jsonl(join(dir, "a.jsonl"));
  });
  after(() => stack?.close());

  test("JSONL: context null, then the sampled tokens split where the update fell, one run per change", () => {
    const [span] = row.spans;
    assert.deepEqual(row.version_runs, [
      { start: 0, version: null },
      { start: span.start, version: "0" },
      { start: span.start + cut, version: "1" },
    ]);
    const versions = expand(row.version_runs, row.num_tokens);
    const trained = versions.filter((_, t) => row.loss_mask[t] === 1);
    assert.deepEqual(trained, [...Array(cut).fill("0"), ...Array(sampled - cut).fill("1")]);
  });

  test("Parquet: the same runs (list<struct<start int32, version string>>)", async () => {
    const [parquet] = await hyparquetRows(join(dir, "a.parquet"));
    assert.deepEqual(parquet!["version_runs"], row.version_runs);
  });

  test("verl: runs over the response; OpenRLHF: runs over sequences", async () => {
    const [verl] = await hyparquetRows(join(dir, "verl.parquet"));
    assert.deepEqual(verl!["response_version_runs"], [
      { start: 0, version: "0" },
      { start: cut, version: "1" },
    ]);
    assert.equal(verl!["response_ids"].length, row.num_tokens - row.spans[0].start);
    const [openrlhf] = await hyparquetRows(join(dir, "openrlhf.parquet"));
    assert.deepEqual(openrlhf!["version_runs"], row.version_runs);
  });
});
