// Rollouts: creation, attribution by path / key / header, finishing, listing; metrics and health.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Worker } from "node:worker_threads";
import { startGateway } from "../gateway/index.ts";
import { createRollout, postJson, rolloutCalls, startStack, tempDir, type Stack } from "./helpers.ts";

const MESSAGES = [{ role: "user", content: "hello" }];

describe("control API and attribution", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.close();
  });

  test("a created rollout has an id, a key and base URLs that reach it", async () => {
    const rollout = await createRollout(stack.gateway.url, {
      group: "task-7",
      task: "fix-bug",
      harness: "qwen-code",
      metadata: { sample: 3 },
    });
    assert.match(rollout.id, /^r_/);
    assert.match(rollout.key, /^rlk_/);
    assert.equal(rollout.base_urls.openai, `${stack.gateway.url}/r/${rollout.id}/v1`);
    assert.equal(rollout.base_urls.anthropic, `${stack.gateway.url}/r/${rollout.id}`);
    const read = (await (await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}`)).json()) as any;
    assert.equal(read.group, "task-7");
    assert.equal(read.task, "fix-bug");
    assert.equal(read.harness, "qwen-code");
    assert.deepEqual(read.metadata, { sample: 3 });
    assert.equal(read.status, "open");
    // One naming convention, snake_case, in every answer; the user's metadata keys are theirs and kept.
    assert.equal(typeof read.created_at, "number");
    assert.equal(read.finished_at, null);
    assert.equal(read.createdAt, undefined);
  });

  test("PUT /api/rollouts/{id} creates with the caller's id (balancers hash on it); a retried PUT answers it again", async () => {
    const put = (id: string, body: unknown) =>
      fetch(`${stack.gateway.url}/api/rollouts/${id}`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const first = await put("job-7.sample-3", { group: "job-7", harness: "codex" });
    assert.equal(first.status, 201);
    const created = (await first.json()) as any;
    assert.equal(created.id, "job-7.sample-3");
    assert.equal(created.base_urls.openai, `${stack.gateway.url}/r/job-7.sample-3/v1`);
    // The same create again (its answer was lost on the way): the same rollout, key included.
    const again = await put("job-7.sample-3", { group: "job-7", harness: "codex" });
    assert.equal(again.status, 200);
    assert.equal(((await again.json()) as any).key, created.key);
    // Another rollout under a taken id, a body naming another id, a bad id: each refused in one sentence.
    const other = await put("job-7.sample-3", { group: "job-8" });
    assert.equal(other.status, 409);
    assert.match(((await other.json()) as any).error.message, /already exists with other settings/);
    const mismatch = await put("job-7.sample-4", { id: "job-7.sample-5" });
    assert.equal(mismatch.status, 400);
    assert.match(((await mismatch.json()) as any).error.message, /differs from the path/);
    const bad = await put("a%20b", {});
    assert.equal(bad.status, 400);
    // Finished, the id stays taken.
    await postJson(`${stack.gateway.url}/api/rollouts/job-7.sample-3/finish`, { reward: 1 });
    assert.equal((await put("job-7.sample-3", { group: "job-7", harness: "codex" })).status, 409);
  });

  test("snake_case everywhere: rollouts, calls, trajectories, finish summaries; metadata and bodies verbatim", async () => {
    const rollout = await createRollout(stack.gateway.url, {
      group: "g-case",
      metadata: { camelKey: { innerKey: 1 } },
    });
    const res = await postJson(`${rollout.base_urls.openai}/chat/completions`, { messages: MESSAGES });
    assert.equal(res.status, 200, res.text);
    const done = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
    const calls = (await (await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/calls`)).json()) as any;
    const trajectories = (await (
      await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/trajectories`)
    ).json()) as any;
    const unattributed = (await (await fetch(`${stack.gateway.url}/api/calls`)).json()) as any;
    const call = await (
      await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/calls/${calls.calls[0].seq}`)
    ).json();
    const ours = (value: unknown, path: string, out: string[]): string[] => {
      if (value === null || typeof value !== "object") return out;
      for (const [k, v] of Object.entries(value)) {
        if (["metadata", "request_received", "request_forwarded", "response", "upstream_response"].includes(k))
          continue;
        if (/[A-Z]/.test(k)) out.push(`${path}.${k}`);
        ours(v, `${path}.${k}`, out);
      }
      return out;
    };
    for (const [what, body] of Object.entries({ finish: done.json, calls, call, trajectories, unattributed })) {
      assert.deepEqual(ours(body, what, []), [], `${what} has camelCase keys`);
    }
    assert.deepEqual(done.json.metadata, { camelKey: { innerKey: 1 } });
    assert.ok(Array.isArray(calls.calls[0].prompt_token_ids) && calls.calls[0].choices[0].token_ids.length > 0);
    assert.equal(typeof calls.calls[0].timings.overhead_ms, "number");
    assert.deepEqual(calls.calls[0].request_received.messages, MESSAGES, "the harness's body as it sent it");
    assert.ok(
      Array.isArray(trajectories.trajectories[0].token_ids) && trajectories.trajectories[0].loss_mask.length > 0,
    );
    assert.equal(typeof done.json.trajectories.stats.unique_tokens, "number");
  });

  test("calls are attributed by path, by rollout key and by header", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const viaPath = await postJson(`${rollout.base_urls.openai}/chat/completions`, { messages: MESSAGES });
    const viaKey = await postJson(
      `${stack.gateway.url}/v1/chat/completions`,
      { messages: MESSAGES },
      {
        authorization: `Bearer ${rollout.key}`,
      },
    );
    const viaApiKey = await postJson(
      `${stack.gateway.url}/v1/chat/completions`,
      { messages: MESSAGES },
      {
        "x-api-key": rollout.key,
      },
    );
    const viaHeader = await postJson(
      `${stack.gateway.url}/v1/chat/completions`,
      { messages: MESSAGES },
      {
        "x-rlgate-rollout": rollout.id,
      },
    );
    for (const res of [viaPath, viaKey, viaApiKey, viaHeader]) assert.equal(res.status, 200, res.text);
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(calls.length, 4);
    assert.ok(calls.every((c) => c.rolloutId === rollout.id));
    // Calls are listed in the order they were made.
    const seqs = calls.map((c) => c.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
    );
  });

  test("each call records its policy version (its x-rlgate-policy-version header, else the rollout's) and sampling parameters", async () => {
    const rollout = await createRollout(stack.gateway.url, { group: "task-7", policy_version: 17 });
    const read = (await (await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}`)).json()) as any;
    assert.equal(read.policy_version, "17");
    const url = `${rollout.base_urls.openai}/chat/completions`;
    assert.equal((await postJson(url, { messages: MESSAGES })).status, 200);
    assert.equal(
      (
        await postJson(
          url,
          { messages: MESSAGES, temperature: 0.6, top_p: 0.95, top_k: 40 },
          { "x-rlgate-policy-version": "18" },
        )
      ).status,
      200,
    );
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.deepEqual(
      calls.map((c) => [c.policyVersion, c.sampling]),
      [
        ["17", null],
        ["18", { temperature: 0.6, topP: 0.95, topK: 40 }],
      ],
    );
    const bad = await postJson(`${stack.gateway.url}/api/rollouts`, { policy_version: { v: 1 } });
    assert.equal(bad.status, 400);
    assert.match(bad.json.error.message, /policy_version/);
  });

  test("a rollout key reaches only its own rollout, and unknown keys are refused", async () => {
    const a = await createRollout(stack.gateway.url);
    const b = await createRollout(stack.gateway.url);
    const cross = await postJson(
      `${b.base_urls.openai}/chat/completions`,
      { messages: MESSAGES },
      {
        authorization: `Bearer ${a.key}`,
      },
    );
    assert.equal(cross.status, 401);
    assert.equal(cross.json.error.code, "RLGATE_UNAUTHORIZED");
    const forged = await postJson(
      `${stack.gateway.url}/v1/chat/completions`,
      { messages: MESSAGES },
      {
        authorization: "Bearer rlk_forged",
      },
    );
    assert.equal(forged.status, 401);
    assert.equal((await rolloutCalls(stack.gateway.url, b.id)).length, 0);
  });

  test("finishing a rollout records reward and status; bad finishes are refused clearly", async () => {
    const rollout = await createRollout(stack.gateway.url, { group: "g-finish" });
    const noReward = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { status: "ok" });
    assert.equal(noReward.status, 400);
    assert.match(noReward.json.error.message, /reward/);
    const badStatus = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, {
      reward: 1,
      status: "great",
    });
    assert.equal(badStatus.status, 400);
    const done = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 0.5 });
    assert.equal(done.status, 200, done.text);
    assert.equal(done.json.status, "ok");
    assert.equal(done.json.reward, 0.5);
    const again = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
    assert.equal(again.status, 400);
    assert.match(again.json.error.message, /already finished/);
    const infra = await createRollout(stack.gateway.url, { group: "g-finish" });
    const infraDone = await postJson(`${stack.gateway.url}/api/rollouts/${infra.id}/finish`, { status: "infra_error" });
    assert.equal(infraDone.status, 200);
    const list = (await (await fetch(`${stack.gateway.url}/api/rollouts?group=g-finish`)).json()) as any;
    assert.deepEqual(list.rollouts.map((r: any) => r.status).sort(), ["infra_error", "ok"]);
    assert.equal(list.rollouts[0].key, undefined, "listing does not reveal rollout keys");
  });

  test("a finish may add metadata: merged key by key into what the rollout was created with", async () => {
    const rollout = await createRollout(stack.gateway.url, { group: "g-meta", metadata: { group_size: 2, keep: 1 } });
    const done = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, {
      status: "infra_error",
      metadata: { runner: { stage: "agent", log: "out of memory" }, keep: 2 },
    });
    assert.equal(done.status, 200);
    assert.deepEqual(done.json.metadata, { group_size: 2, keep: 2, runner: { stage: "agent", log: "out of memory" } });
    const read = (await (await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}`)).json()) as any;
    assert.equal(read.metadata.runner.stage, "agent");
    const bad = await postJson(
      `${stack.gateway.url}/api/rollouts/${(await createRollout(stack.gateway.url)).id}/finish`,
      { reward: 1, metadata: [1] },
    );
    assert.equal(bad.status, 400);
    assert.match(bad.json.error.message, /metadata/);
  });

  test("a finish whose trajectory summary cannot be made is still a finish: 200, no summary, the reason", async () => {
    const rollout = await createRollout(stack.gateway.url, { group: "g-summary" });
    // Stands in for the trajectory worker dying while it makes the summary.
    const post = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function (
      this: Worker,
      message: unknown,
      transfer?: Parameters<Worker["postMessage"]>[1],
    ) {
      if ((message as { kind?: string }).kind === "summary") void this.terminate(); // before it can answer
      return post.call(this, message, transfer);
    };
    try {
      const done = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
      assert.equal(done.status, 200, done.text);
      assert.equal(done.json.status, "ok");
      assert.equal(done.json.trajectories, null);
      assert.match(done.json.trajectories_error, /trajectory worker exited/);
    } finally {
      Worker.prototype.postMessage = post;
    }
    // The worker is started again for the next request.
    const trajectories = await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/trajectories`);
    assert.equal(trajectories.status, 200);
  });

  test("--require-rollout refuses unattributed calls", async () => {
    const dataDir = tempDir("require");
    const gateway = await startGateway({ upstream: stack.sim.url, port: 0, dataDir, requireRollout: true });
    try {
      const res = await postJson(`${gateway.url}/v1/chat/completions`, { messages: MESSAGES });
      assert.equal(res.status, 400);
      assert.equal(res.json.error.code, "RLGATE_ROLLOUT_REQUIRED");
      const rollout = await createRollout(gateway.url);
      assert.equal(
        (await postJson(`${rollout.base_urls.openai}/chat/completions`, { messages: MESSAGES })).status,
        200,
      );
    } finally {
      await gateway.close();
    }
  });

  test("the control API needs the token when one is set, and non-loopback listening requires one", async () => {
    await assert.rejects(
      startGateway({ upstream: stack.sim.url, port: 0, dataDir: tempDir("open"), host: "0.0.0.0" }),
      /without a control token/,
    );
    const gateway = await startGateway({
      upstream: stack.sim.url,
      port: 0,
      dataDir: tempDir("token"),
      controlToken: "s3cret",
    });
    try {
      const denied = await postJson(`${gateway.url}/api/rollouts`, {});
      assert.equal(denied.status, 401);
      const allowed = await postJson(`${gateway.url}/api/rollouts`, {}, { authorization: "Bearer s3cret" });
      assert.equal(allowed.status, 201);
    } finally {
      await gateway.close();
    }
  });

  test("pass-through routes reach the upstream unchanged; metrics and health answer", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const models = await fetch(`${rollout.base_urls.openai}/models`);
    assert.equal(models.status, 200);
    const direct = await fetch(`${stack.sim.url}/v1/models`);
    assert.deepEqual(
      ((await models.json()) as any).data.map((m: any) => m.id),
      ((await direct.json()) as any).data.map((m: any) => m.id),
    );
    assert.equal((await fetch(`${stack.gateway.url}/healthz`)).status, 200);
    await postJson(`${rollout.base_urls.openai}/chat/completions`, { messages: MESSAGES });
    const metrics = await (await fetch(`${stack.gateway.url}/metrics`)).text();
    assert.match(metrics, /rlgate_requests_total\{api="chat.completions",status="ok"\} \d+/);
    assert.match(metrics, /rlgate_tokens_captured_total\{kind="sampled"\} \d+/);
    assert.match(metrics, /rlgate_overhead_seconds_bucket/);
    assert.match(metrics, /rlgate_upstream_latency_seconds_count\{api="chat.completions"\} \d+/);
    assert.match(metrics, /rlgate_passthrough_requests_total [1-9]/);
  });

  test("concurrent creates of one id and concurrent finishes: one wins, the others are answered, nothing overwritten", async () => {
    const url = stack.gateway.url;
    const send = (method: string, path: string, body: unknown) =>
      fetch(`${url}${path}`, { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const puts = await Promise.all(
      Array.from({ length: 6 }, () => send("PUT", "/api/rollouts/race-put", { group: "g" })),
    );
    const putBodies = (await Promise.all(puts.map((r) => r.json()))) as Array<{ key: string }>;
    assert.deepEqual(
      puts.map((r) => r.status).sort(),
      [200, 200, 200, 200, 200, 201],
      "one PUT creates, the others answer the same rollout",
    );
    assert.equal(new Set(putBodies.map((b) => b.key)).size, 1, "one rollout key: no create overwrote another");
    const posts = await Promise.all(
      Array.from({ length: 6 }, () => send("POST", "/api/rollouts", { id: "race-post", group: "g" })),
    );
    assert.deepEqual(posts.map((r) => r.status).sort(), [201, 400, 400, 400, 400, 400]);
    const finishes = await Promise.all(
      Array.from({ length: 6 }, (_, i) => send("POST", "/api/rollouts/race-put/finish", { reward: i })),
    );
    assert.deepEqual(finishes.map((r) => r.status).sort(), [200, 400, 400, 400, 400, 400], "one finish");
    const won = (await finishes.find((r) => r.status === 200)!.json()) as { reward: number };
    const stored = (await (await fetch(`${url}/api/rollouts/race-put`)).json()) as { reward: number };
    assert.equal(stored.reward, won.reward, "the stored reward is the answered finish's");
  });
});
