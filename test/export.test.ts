// `rlgate export`: trajectories as JSONL rows that equal the gateway's own reconstruction, readable from Python.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
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

const execFileAsync = promisify(execFile);
const cli = (args: string[]) => runCli(args);

describe("rlgate export", () => {
  let stack: Stack;
  const ids: string[] = [];
  before(async () => {
    // History repair off: one harness below drops its reasoning, and its re-serialized history makes three trajectories.
    stack = await startStack({ sim: { script: AGENT_SCRIPT }, gateway: { repairHistory: false } });
    for (const [keep, reward] of [
      [true, 1],
      [false, 0],
    ] as const) {
      const rollout = await createRollout(stack.gateway.url, {
        group: "g-export",
        harness: "scripted",
        task: "count files",
      });
      await playAgent(rollout.base_urls.openai, AGENT_SCRIPT.length, keep);
      await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward });
      ids.push(rollout.id);
    }
    // An open rollout is not exported by a group selection: it may still take calls.
    const open = await createRollout(stack.gateway.url, { group: "g-export" });
    await playAgent(open.base_urls.openai, 1, true);
  });
  after(() => stack?.close());

  test("one row per trajectory, equal to the gateway's reconstruction, with a summary on stderr", async () => {
    const out = join(tempDir("export"), "out.jsonl");
    const run = await cli(["export", "--group", "g-export", "--gateway", stack.gateway.url, "-o", out]);
    assert.equal(run.code, 0, run.stderr);
    const rows = readFileSync(out, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    // The faithful rollout is one trajectory; the one whose reasoning was dropped re-serialized twice: three.
    assert.deepEqual(
      rows.map((r) => r.rollout_id),
      [ids[0], ids[1], ids[1], ids[1]],
    );
    for (const id of ids) {
      const rec = (await (await fetch(`${stack.gateway.url}/api/rollouts/${id}/trajectories`)).json()) as any;
      const mine = rows.filter((r) => r.rollout_id === id);
      assert.deepEqual(
        mine.map((r) => r.token_ids),
        rec.trajectories.map((t: any) => t.token_ids),
      );
      assert.deepEqual(
        mine.map((r) => r.loss_mask),
        rec.trajectories.map((t: any) => t.loss_mask),
      );
      assert.deepEqual(
        mine.map((r) => r.logprobs),
        rec.trajectories.map((t: any) => t.logprobs),
      );
    }
    assert.equal(rows[0].group, "g-export");
    assert.equal(rows[0].task, "count files");
    assert.equal(rows[0].reward, 1);
    assert.equal(rows[1].reward, 0);
    assert.equal(rows[0].segment, "main");
    assert.equal(rows[0].advantages, null);
    assert.match(run.stderr, /rollouts\s+flagged\s+trajectories\s+tokens\s+trained tokens/);
    assert.match(run.stderr, new RegExp(`\\s2\\s+0\\s+4\\s`));

    // What a Python trainer does with it: numpy arrays of the right dtypes and lengths.
    const py = await execFileAsync(
      "/usr/bin/python3",
      [
        "-c",
        [
          "import json, sys, numpy as np",
          "rows = [json.loads(l) for l in open(sys.argv[1])]",
          "ids = np.asarray(rows[0]['token_ids'], dtype='<i4'); mask = np.asarray(rows[0]['loss_mask'], dtype='u1')",
          "lp = np.asarray([0.0 if x is None else x for x in rows[0]['logprobs']], dtype='<f4')",
          "assert ids.shape == mask.shape == lp.shape",
          "print(len(rows), int(mask.sum()), float(lp[mask == 1].sum()) < 0)",
        ].join("\n"),
        out,
      ],
      { encoding: "utf8" },
    );
    const trained = rows[0].loss_mask.reduce((a: number, b: number) => a + b, 0);
    assert.equal(py.stdout.trim(), `4 ${trained} True`);
  });

  test("to stdout from a store directory; --trained-only keeps trained trajectories", async () => {
    const run = await cli(["export", ids[1]!, "--data", stack.dataDir, "--trained-only"]);
    assert.equal(run.code, 0, run.stderr);
    const rows = run.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.ok(rows.length >= 1 && rows.every((r) => r.trained && !r.flagged));
    assert.match(run.stderr, /stdout/);
  });

  test("failures: an unknown rollout, a store directory that does not exist", async () => {
    const unknown = await cli(["export", "r_missing", "--gateway", stack.gateway.url]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /unknown rollout 'r_missing'/);
    const nostore = await cli(["export", "--group", "g", "--data", "/nonexistent/rlgate-store"]);
    assert.equal(nostore.code, 1);
    assert.match(nostore.stderr, /no store at \/nonexistent\/rlgate-store/);
  });
});
