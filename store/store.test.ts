import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { RawJson, SplicedJson, type CallRecord, type RolloutRecord } from "./records.ts";
import { Store } from "./store.ts";
import { testCallRecord } from "./test-support.ts";
import { PromptIndex } from "../trajectory/prompt-index.ts";

function call(store: Store, rolloutId: string | null, prompt: number[]): CallRecord {
  const received = new RawJson('{"model":"m","messages":[{"role":"user","content":"hi"}]}');
  return testCallRecord({
    seq: store.nextCallSeq(),
    rolloutId,
    model: "m",
    requestReceived: received,
    requestForwarded: new SplicedJson(received, 1, Buffer.from('"return_token_ids":true,')),
    response: { choices: [] },
    promptTokenIds: prompt,
    choices: [{ index: 0, tokenIds: [7, 8], logprobs: [-0.5, -0.25], finishReason: "stop" }],
  });
}

/** Runs `fn` with a store in a fresh directory, closed and removed afterwards. */
async function withStore(fn: (store: Store) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-store-"));
  const store = new Store({ path: dir, promptIndex: new PromptIndex() });
  try {
    await fn(store);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

test("calls finishing in one turn are committed together, each resolving once readable, forwarded bodies exact", () =>
  withStore(async (store) => {
    const calls = [call(store, null, [1, 2, 3]), call(store, null, [1, 2, 3, 7, 8, 4]), call(store, null, [9])];
    await Promise.all(
      calls.map(async (c) => {
        await store.putCall(c);
        assert.ok(store.getCall(null, c.seq), `call ${c.seq} is readable once its put resolved`);
      }),
    );
    const stored = store.listCalls(null);
    assert.deepEqual(
      stored.map((c) => c.promptTokenIds),
      calls.map((c) => c.promptTokenIds),
    );
    assert.deepEqual(stored[0]!.requestForwarded, {
      return_token_ids: true,
      model: "m",
      messages: [{ role: "user", content: "hi" }],
    });
  }));

test("closing commits the calls still pending and then refuses new ones with a clear error", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-store-"));
  const store = new Store({ path: dir, promptIndex: new PromptIndex() });
  const pending = store.putCall(call(store, null, [5]));
  await store.close();
  await pending;
  await assert.rejects(store.putCall(call(store, null, [6])), /store is closed/);
  const reopened = new Store({ path: dir, promptIndex: new PromptIndex() });
  try {
    assert.deepEqual(
      reopened.listCalls(null).map((c) => c.promptTokenIds),
      [[5]],
    );
  } finally {
    await reopened.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("rollout records are served from memory after a committed write, frozen", () =>
  withStore(async (store) => {
    const rollout: RolloutRecord = {
      id: "r1",
      key: "rlk_x",
      group: null,
      task: null,
      harness: null,
      metadata: {},
      status: "open",
      reward: null,
      createdAt: 1,
      finishedAt: null,
    };
    await store.putRollout(rollout);
    const got = store.getRollout("r1")!;
    assert.ok(Object.isFrozen(got));
    assert.equal(store.getRollout("r1"), got, "the same decoded record is served again");
    await store.finishRollout({ ...got, status: "ok", reward: 1, finishedAt: 2 });
    assert.equal(store.getRollout("r1")!.status, "ok");
  }));

test("a consumer group's state is written in one transaction with its cursor and read back as its own", () =>
  withStore(async (store) => {
    // "a" and "ab": one group's name a prefix of another's.
    await store.writeConsumerState("a", {
      committed: 5,
      leases: new Map([
        [7, "core0"],
        [8, "core1"],
      ]),
      acked: new Map([[9, true]]),
      affinity: new Map([["group:g", { member: "core0", last: 7 }]]),
    });
    await store.writeConsumerState("ab", { leases: new Map([[7, "other"]]), acked: new Map(), affinity: new Map() });
    await store.writeConsumerState("a", {
      leases: new Map([[8, null]]),
      acked: new Map([
        [9, false],
        [10, true],
      ]),
      affinity: new Map([
        ["group:g", null],
        ["group:h", { member: "core1", last: 8 }],
      ]),
    });
    const state = store.getConsumerState("a");
    assert.equal(store.getCursor("a"), 5);
    assert.deepEqual([...state.leases], [[7, "core0"]]);
    assert.deepEqual(state.acked, [10]);
    assert.deepEqual([...state.affinity], [["group:h", { member: "core1", last: 8 }]]);
    assert.deepEqual([...store.getConsumerState("ab").leases], [[7, "other"]]);
    assert.equal(store.getCursor("ab"), 0);
  }));
