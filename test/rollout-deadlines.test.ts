// Rollouts always end (issue 22, item 4): a rollout still open at its deadline (`deadline_s`, else the gateway's
// --rollout-timeout) is finished by the gateway as `timeout` without a reward, enters the finished log once and
// reaches the trajectory stream; later calls are refused as for any finished rollout. Also the explicit `round`:
// validated on creation, kept on the record and sent on the stream.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { TrajectoryConsumer } from "../clients/ts/index.ts";
import type { RolloutMessage } from "../protocol/index.ts";
import { serveCommand } from "../cli/serve-command.ts";
import { DEFAULT_ROLLOUT_TIMEOUT_MS } from "../gateway/rollout-deadlines.ts";
import { createRollout, postJson, rolloutCalls, startStack, until, type Stack } from "./helpers.ts";

const chat = { model: "Qwen/Qwen3-8B", messages: [{ role: "user", content: "hi" }] };

async function getRollout(url: string, id: string): Promise<any> {
  const res = await fetch(`${url}/api/rollouts/${id}`);
  assert.equal(res.status, 200);
  return res.json();
}

/** The rollout once it is no longer open. */
function ended(url: string, id: string, timeoutMs = 10_000): Promise<any> {
  return until(
    async () => {
      const r = await getRollout(url, id);
      return r.status === "open" ? undefined : r;
    },
    timeoutMs,
    `rollout ${id} to end`,
  );
}

async function timedOutTotal(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("rlgate_rollouts_timed_out_total "));
  assert.ok(line, "rlgate_rollouts_timed_out_total is exported");
  return Number(line.split(" ")[1]);
}

describe("rollouts always end: deadline_s and --rollout-timeout", () => {
  let stack: Stack;
  const received: RolloutMessage[] = [];
  let consumer: TrajectoryConsumer;
  before(async () => {
    // Swept by hand here (the timer is an hour off), so what a rollout holds when it is finished is not a race with a
    // slow first call; the timer's own sweeps are tested on the stacks below.
    stack = await startStack({ gateway: { grpcPort: 0, deadlineSweepMs: 3_600_000 } });
    consumer = new TrajectoryConsumer({
      address: stack.gateway.grpc!.address,
      member: "deadline-test",
      onRollout(m) {
        received.push(m);
        consumer.ack([m.cursor]);
      },
    });
    consumer.start();
  });
  after(async () => {
    await consumer?.close();
    await stack?.close();
  });

  test("a rollout open past its deadline_s is finished as timeout without a reward, once, and is streamed with its round", async () => {
    const url = stack.gateway.url;
    const created = (await createRollout(url, { group: "task-7", round: 3, deadline_s: 0.3 })) as any;
    assert.equal(created.round, 3);
    assert.equal(created.deadline_at, created.created_at + 300);
    assert.equal(created.finish_cursor, null);
    const call = await postJson(`${created.base_urls.openai}/chat/completions`, chat);
    assert.equal(call.status, 200, call.text);
    assert.equal(await stack.gateway.deadlines.sweep(created.deadline_at - 1), 0, "not due before its deadline");
    await until(() => (Date.now() >= created.deadline_at ? true : undefined), 10_000, "the deadline");
    assert.equal(await stack.gateway.deadlines.sweep(), 1);

    const done = await getRollout(url, created.id);
    assert.equal(done.status, "timeout");
    assert.equal(done.reward, null);
    assert.equal(done.metadata.finished_by, "deadline");
    assert.ok(done.finished_at >= created.deadline_at, "not before its deadline");
    assert.equal(typeof done.finish_cursor, "number");

    // Entered the finished log exactly once, also when swept again.
    assert.equal(await stack.gateway.deadlines.sweep(Date.now() + 10_000), 0);
    const log = stack.gateway.context.store.finishedAfter(0, 1000).filter((e) => e.rolloutId === created.id);
    assert.deepEqual(log, [{ cursor: done.finish_cursor, rolloutId: created.id }]);
    assert.equal(await timedOutTotal(url), 1);

    const message = await until(() => received.find((m) => m.rolloutId === created.id), 20_000, "the stream");
    assert.equal(message.status, "timeout");
    assert.equal(message.hasReward, false);
    assert.equal(message.round, 3);
    assert.equal(message.group, "task-7");
    assert.equal(message.trajectories.rows, 1, "its call's trajectory travels with it");

    // Afterwards it is a finished rollout like any other: calls refused (and recorded), a finish refused.
    const late = await postJson(`${created.base_urls.openai}/chat/completions`, chat);
    assert.equal(late.status, 409, late.text);
    assert.match(late.text, /is finished \(timeout\) and takes no more calls/);
    const calls = await rolloutCalls(url, created.id);
    assert.deepEqual(
      calls.map((c) => c.status),
      ["ok", "rejected"],
    );
    const finish = await postJson(`${url}/api/rollouts/${created.id}/finish`, { reward: 1 });
    assert.equal(finish.status, 400);
    assert.match(finish.text, /already finished \(timeout\)/);
  });

  test("a rollout finished before its deadline keeps its finish, and leaves no deadline behind", async () => {
    const url = stack.gateway.url;
    const before = await timedOutTotal(url);
    const created = await createRollout(url, { group: "task-8", deadline_s: 0.2 });
    const finish = await postJson(`${url}/api/rollouts/${created.id}/finish`, { reward: 0.5 });
    assert.equal(finish.status, 200, finish.text);
    assert.equal(typeof finish.json.finish_cursor, "number");
    const due = stack.gateway.context.store.dueRollouts(Date.now() + 3_600_000, 1000);
    assert.ok(!due.some((d) => d.rolloutId === created.id), "the finish removed its deadline");
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(await stack.gateway.deadlines.sweep(), 0);
    const r = await getRollout(url, created.id);
    assert.equal(r.status, "ok");
    assert.equal(r.reward, 0.5);
    assert.equal(await timedOutTotal(url), before);
  });

  test("a call in flight at the deadline completes for its harness and is recorded on the timed-out rollout", async () => {
    const slow = await startStack({ sim: { ttftMs: 1_200 }, gateway: { deadlineSweepMs: 25 } });
    try {
      const url = slow.gateway.url;
      const created = await createRollout(url, { deadline_s: 0.2 });
      const call = await postJson(`${created.base_urls.openai}/chat/completions`, chat);
      assert.equal(call.status, 200, call.text);
      const done = await getRollout(url, created.id);
      assert.equal(done.status, "timeout", "finished while the call was in flight");
      const calls = await rolloutCalls(url, created.id);
      assert.deepEqual(
        calls.map((c) => c.status),
        ["ok"],
      );
      assert.ok(calls[0]!.timings.end > done.finished_at, "the call ended after the finish");
    } finally {
      await slow.close();
    }
  });

  test("--rollout-timeout: a deadline for every rollout without its own; deadline_s overrides it; 0 is none", async () => {
    assert.equal(DEFAULT_ROLLOUT_TIMEOUT_MS, 3_600_000);
    assert.equal(serveCommand().opts()["rolloutTimeout"], DEFAULT_ROLLOUT_TIMEOUT_MS, "serve's default");
    const timed = await startStack({ gateway: { rolloutTimeoutMs: 250, deadlineSweepMs: 25 } });
    try {
      const url = timed.gateway.url;
      const plain = (await createRollout(url, {})) as any;
      assert.equal(plain.deadline_at, plain.created_at + 250);
      const own = (await createRollout(url, { deadline_s: 3600 })) as any;
      assert.equal(own.deadline_at, own.created_at + 3_600_000);
      assert.equal((await ended(url, plain.id)).status, "timeout");
      assert.equal((await getRollout(url, own.id)).status, "open");
      assert.equal(await timedOutTotal(url), 1);
    } finally {
      await timed.close();
    }
    // The stack above (no --rollout-timeout): no deadline unless given.
    const none = (await createRollout(stack.gateway.url, {})) as any;
    assert.equal(none.deadline_at, null);
    assert.equal(none.round, null);
  });

  test("round and deadline_s are validated: a 400 naming the field", async () => {
    const url = stack.gateway.url;
    for (const [body, param, message] of [
      [{ round: 0 }, "round", /round: expected a positive integer/],
      [{ round: -2 }, "round", /round: expected a positive integer/],
      [{ round: 1.5 }, "round", /round: expected a positive integer/],
      [{ round: "3" }, "round", /round: expected a positive integer/],
      [{ round: 2 ** 32 }, "round", /round: expected a positive integer up to 4294967295/],
      [{ deadline_s: 0 }, "deadline_s", /deadline_s: expected a positive number of seconds/],
      [{ deadline_s: -1 }, "deadline_s", /deadline_s: expected a positive number of seconds/],
      [{ deadline_s: "60" }, "deadline_s", /deadline_s: expected a positive number of seconds/],
    ] as const) {
      const res = await postJson(`${url}/api/rollouts`, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.json.error.param, param);
      assert.match(res.json.error.message, message);
    }
  });

  test("a repeated PUT must name the same round", async () => {
    const url = stack.gateway.url;
    const put = (body: unknown) =>
      fetch(`${url}/api/rollouts/put-round`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    assert.equal((await put({ group: "g", round: 4 })).status, 201);
    assert.equal((await put({ group: "g", round: 4 })).status, 200);
    assert.equal((await put({ group: "g", round: 5 })).status, 409);
    assert.equal((await put({ group: "g" })).status, 409);
  });
});
