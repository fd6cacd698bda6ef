// Rollouts driven through the gateway become trajectories: GET /api/rollouts/{id}/trajectories, rlgate show, and
// prompts stored as references so stored token bytes follow the rollout's unique tokens.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { rmSync } from "node:fs";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { startGateway } from "../gateway/index.ts";
import {
  AGENT_SCRIPT,
  createRollout,
  playAgent,
  postJson,
  rolloutCalls,
  ROOT,
  startStack,
  tempDir,
  type Stack,
} from "./helpers.ts";

const execFileAsync = promisify(execFile);

describe("trajectories from captured rollouts", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { script: AGENT_SCRIPT } });
  });
  after(async () => {
    await stack.close();
  });

  test("a harness that sends its history back faithfully yields one trajectory: mask 1 exactly on sampled tokens", async () => {
    const rollout = await createRollout(stack.gateway.url, { group: "g", harness: "scripted" });
    await playAgent(rollout.base_urls.openai, AGENT_SCRIPT.length, true);
    const finished = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
    assert.equal(finished.status, 200, finished.text);
    assert.equal(finished.json.trajectories.stats.retained_trajectories, 1);

    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(calls.length, 3);
    const res = await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/trajectories`);
    const rec = (await res.json()) as any;
    assert.equal(rec.trajectories.length, 1);
    const [trajectory] = rec.trajectories;
    assert.equal(trajectory.segment, "main");
    assert.equal(trajectory.reward, 1);
    assert.equal(rec.flags.flagged, false);
    assert.deepEqual(rec.breaks, []);
    // The trajectory is the last call's prompt + completion; its trained tokens are every call's sampled tokens.
    const last = calls.at(-1)!;
    assert.deepEqual(trajectory.token_ids, [...last.promptTokenIds!, ...last.choices[0]!.tokenIds]);
    const trained = trajectory.token_ids.filter((_: number, i: number) => trajectory.loss_mask[i] === 1);
    assert.deepEqual(
      trained,
      calls.flatMap((c) => c.choices[0]!.tokenIds),
    );
    const trainedLogprobs = trajectory.logprobs.filter((_: number, i: number) => trajectory.loss_mask[i] === 1);
    assert.deepEqual(
      trainedLogprobs,
      calls.flatMap((c) => c.choices[0]!.logprobs!),
    );
  });

  test("dropping reasoning from history re-serializes it: breaks are classified and each completion stays a leaf", async () => {
    // History repair would put the reasoning back (one trajectory): this gateway forwards histories as sent.
    const dataDir = tempDir("no-repair");
    const plain = await startGateway({ upstream: stack.sim.url, port: 0, dataDir, repairHistory: false });
    try {
      const rollout = await createRollout(plain.url);
      await playAgent(rollout.base_urls.openai, AGENT_SCRIPT.length, false);
      const rec = (await (await fetch(`${plain.url}/api/rollouts/${rollout.id}/trajectories`)).json()) as any;
      assert.equal(rec.stats.breaks.reserialization, 2, JSON.stringify(rec.breaks));
      assert.equal(rec.trajectories.length, 3);
      // Every sampled token is trained exactly once across the trajectories.
      const calls = await rolloutCalls(plain.url, rollout.id);
      const sampled = calls.reduce((n, c) => n + c.choices[0]!.tokenIds.length, 0);
      const trained = rec.trajectories.reduce(
        (n: number, t: any) => n + t.loss_mask.filter((m: number) => m === 1).length,
        0,
      );
      assert.equal(trained, sampled);

      // The gateway lives in this process: the CLI must run asynchronously so the gateway can answer it.
      const out = await execFileAsync(
        process.execPath,
        ["--import", "tsx", "cli/index.ts", "show", rollout.id, "--gateway", plain.url, "--no-color"],
        { cwd: ROOT, encoding: "utf8", timeout: 60_000 },
      );
      assert.match(out.stdout, new RegExp(`rollout ${rollout.id}`));
      assert.match(out.stdout, /reserialization/);
      assert.match(out.stdout, /⟦#/, "sampled spans are marked");
      assert.match(out.stdout, /<tool_call>/);
    } finally {
      await plain.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("prompts are stored as references: stored id bytes stay within 1.5 × 4 B × unique tokens, across a restart", async () => {
    const rollout = await createRollout(stack.gateway.url);
    await playAgent(rollout.base_urls.openai, AGENT_SCRIPT.length, true);
    const before = await rolloutCalls(stack.gateway.url, rollout.id);
    const rec = (await (await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/trajectories`)).json()) as any;
    const bytes = stack.gateway.context.store.storedTokenBytes(rollout.id);
    const sumOfPrompts = before.reduce((n, c) => n + c.promptTokenIds!.length, 0);
    assert.ok(
      bytes.ids <= 1.5 * 4 * rec.stats.unique_tokens,
      `${bytes.ids} B for ${rec.stats.unique_tokens} unique tokens`,
    );
    assert.ok(bytes.ids < (4 * sumOfPrompts) / 2, "whole prompts were stored");

    // A second gateway on the same store reads the same prompts, and keeps storing new calls as references.
    const dataDir = stack.dataDir;
    await stack.gateway.close();
    stack.gateway = await startGateway({ upstream: stack.sim.url, port: 0, dataDir });
    const again = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.deepEqual(
      again.map((c) => c.promptTokenIds),
      before.map((c) => c.promptTokenIds),
    );
    // A retry of the last call: its whole prompt is found in the rebuilt tree, so only the sampled ids are new.
    const res = await postJson(
      `${stack.gateway.url}/r/${rollout.id}/v1/chat/completions`,
      before.at(-1)!.requestReceived,
    );
    assert.equal(res.status, 200);
    const after = stack.gateway.context.store.storedTokenBytes(rollout.id);
    const latest = (await rolloutCalls(stack.gateway.url, rollout.id)).at(-1)!;
    assert.deepEqual(latest.promptTokenIds, before.at(-1)!.promptTokenIds);
    assert.equal(after.ids - bytes.ids, latest.choices[0]!.tokenIds.length * 4, "the retried prompt was stored again");
  });
});
