// Per-token versions in every `rlgate export` format, checked against the gateway's records independently of the
// export's own bookkeeping: a two-turn rollout whose second answer an abort-mode update cuts (versions 0, then 1).
// For each sampled span of an exported trajectory the span's ids are found in its call's recorded answer (by id,
// not by position), and each token's expected version is the recorded run over that answer; context is null. Each
// format's runs, expanded over its own token array (JSONL and Parquet token_ids, verl response_ids, OpenRLHF
// sequences), must give exactly those versions.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { CallRecord } from "../store/records.ts";
import { createRollout, postJson, rolloutCalls, runCli, startStack, tempDir, type Stack } from "./helpers.ts";
import { hyparquetRows } from "./parquet-readers.ts";

type Runs = Array<{ start: number; version: string | null }>;

function expand(runs: Runs, n: number): Array<string | null> {
  return Array.from({ length: n }, (_, t) => [...runs].reverse().find((r) => r.start <= t)?.version ?? null);
}

/** Where `part` sits in `whole` (the only place), or -1. */
function findOnce(whole: readonly number[], part: readonly number[]): number {
  const at: number[] = [];
  for (let k = 0; k + part.length <= whole.length; k++) if (part.every((x, i) => whole[k + i] === x)) at.push(k);
  return at.length === 1 ? at[0]! : -1;
}

/** The version of each position of an exported trajectory, from the gateway's call records. */
function expectedVersions(row: any, calls: readonly CallRecord[]): Array<string | null> {
  const out = new Array<string | null>(row.token_ids.length).fill(null);
  for (const span of row.spans) {
    const call = calls.find((c) => c.seq === span.call_seq)!;
    const answer = call.choices[span.choice_index]!.tokenIds;
    const k0 = findOnce(answer, row.token_ids.slice(span.start, span.end));
    assert.ok(k0 >= 0, `span ${span.start}-${span.end} found once in call ${span.call_seq}'s answer`);
    const runs = call.policyUpdate?.versions ?? [{ start: 0, version: call.policyVersion ?? null }];
    for (let t = span.start; t < span.end; t++) out[t] = expand(runs, answer.length)[k0 + t - span.start]!;
  }
  return out;
}

let stack: Stack;
let dir = "";
let calls: CallRecord[] = [];

before(async () => {
  stack = await startStack({ sim: { seed: 4, interTokenMs: 2 }, gateway: { prompts: "tokens" } });
  const url = stack.gateway.url;
  const rollout = await createRollout(url, { group: "g-aligned", policy_version: "0" });
  const chat = `${url}/r/${rollout.id}/v1/chat/completions`;
  const ask = { model: "Qwen/Qwen3-8B", seed: 5, max_tokens: 30 };
  const first = await postJson(chat, { ...ask, messages: [{ role: "user", content: "Hello there." }] });
  assert.equal(first.status, 200, first.text);
  const history = [
    { role: "user", content: "Hello there." },
    { role: "assistant", content: first.json.choices[0].message.content },
    { role: "user", content: "Say something long, please." },
  ];
  const res = await fetch(chat, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...ask, max_tokens: 60, stream: true, messages: history }),
  });
  assert.equal(res.status, 200);
  const reader = (res.body as unknown as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
  for (let events = 0; events < 6; events++) assert.equal((await reader.next()).done, false);
  assert.equal((await postJson(`${url}/api/policy/pause`, { mode: "abort" })).status, 200);
  assert.equal((await postJson(`${url}/api/policy/resume`, { version: "1" })).status, 200);
  while (!(await reader.next()).done);
  assert.equal((await postJson(`${url}/api/rollouts/${rollout.id}/finish`, { reward: 1 })).status, 200);
  calls = await rolloutCalls(url, rollout.id);
  assert.equal(calls.length, 2);
  assert.equal(calls[1]!.policyUpdate?.versions?.length, 2, "the update fell inside the second answer");
  dir = tempDir("export-aligned");
  for (const [format, file] of [
    ["jsonl", "a.jsonl"],
    ["parquet", "a.parquet"],
    ["verl", "verl.parquet"],
    ["openrlhf", "openrlhf.parquet"],
  ] as const) {
    const run = await runCli([
      "export",
      "--group",
      "g-aligned",
      "--gateway",
      url,
      "--format",
      format,
      "-o",
      join(dir, file),
    ]);
    assert.equal(run.code, 0, run.stderr);
  }
});
after(() => stack?.close());

test("every format's runs give each exported token the version its call's record says", async () => {
  const rows = readFileSync(join(dir, "a.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  const parquet = await hyparquetRows(join(dir, "a.parquet"));
  const verl = await hyparquetRows(join(dir, "verl.parquet"));
  const openrlhf = await hyparquetRows(join(dir, "openrlhf.parquet"));
  assert.ok(rows.length >= 1);
  const versionsSeen = new Set<string | null>();
  rows.forEach((row, i) => {
    const expected = expectedVersions(row, calls);
    expected.forEach((v) => versionsSeen.add(v));
    assert.deepEqual(expand(row.version_runs, row.token_ids.length), expected, `JSONL row ${i}`);
    assert.deepEqual(
      expand(parquet[i]!["version_runs"], parquet[i]!["token_ids"].length),
      expected,
      `Parquet row ${i}`,
    );
  });
  assert.deepEqual([...versionsSeen].sort(), ["0", "1", null], "both versions and context in the trajectories");
  // Trainer formats: trained trajectories, in order.
  const trained = rows.filter((r) => r.trained && !r.flagged && r.loss_mask.includes(1));
  assert.equal(verl.length, trained.length);
  assert.equal(openrlhf.length, trained.length);
  trained.forEach((row, i) => {
    const expected = expectedVersions(row, calls);
    const p = row.loss_mask.indexOf(1);
    assert.deepEqual(verl[i]!["response_ids"], row.token_ids.slice(p));
    assert.deepEqual(
      expand(verl[i]!["response_version_runs"], verl[i]!["response_ids"].length),
      expected.slice(p),
      `verl row ${i}: over the response`,
    );
    assert.deepEqual(openrlhf[i]!["sequences"], row.token_ids);
    assert.deepEqual(
      expand(openrlhf[i]!["version_runs"], openrlhf[i]!["sequences"].length),
      expected,
      `OpenRLHF row ${i}: over sequences`,
    );
  });
});
