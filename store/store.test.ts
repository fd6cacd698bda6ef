import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { RawJson, SplicedJson, type CallRecord, type RolloutRecord } from "./records.ts";
import { Store, type Durability } from "./store.ts";
import { dropStoredCall, testCallRecord, testRolloutRecord } from "./test-support.ts";
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
async function withStore(fn: (store: Store) => Promise<void>, durability: Durability = "commit"): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-store-"));
  const store = new Store({ path: dir, promptIndex: new PromptIndex(), durability });
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

test("a call whose prompt or body refers to a call the store lacks is not recorded; the rollout stays readable", () =>
  withStore(async (store) => {
    await store.putRollout(testRolloutRecord({ id: "r1" }));
    const first = call(store, "r1", [1, 2, 3]);
    await store.putCall(first);
    dropStoredCall(store, "r1", first.seq);
    const second = call(store, "r1", [1, 2, 3, 7, 8, 4]); // continues the first call's prompt and answer
    await assert.rejects(
      store.putCall(second),
      new RegExp(
        `call ${second.seq} of rollout r1 was not recorded: it refers to call ${first.seq}, which is not in the store`,
      ),
    );
    assert.deepEqual(store.listCallTokens("r1"), [], "nothing refers to the missing call");
    const third = call(store, "r1", [1, 2, 3, 7, 8, 4, 9]);
    await store.putCall(third);
    assert.deepEqual(
      store.listCalls("r1").map((c) => c.promptTokenIds),
      [[1, 2, 3, 7, 8, 4, 9]],
      "the next call is stored against what the store holds",
    );

    // The same for a request body stored as the start of an earlier body.
    const conversation = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(4000) }] });
    const withBody = (prompt: number[], body: string) => ({
      ...call(store, "r1", prompt),
      requestReceived: new RawJson(body),
    });
    const base = withBody([20], conversation);
    await store.putCall(base);
    dropStoredCall(store, "r1", base.seq);
    const next = withBody([21], `${conversation.slice(0, -1)},"n":1}`);
    await assert.rejects(store.putCall(next), new RegExp(`it refers to call ${base.seq}, which is not in the store`));
    assert.equal(store.listCalls("r1").length, 1);
  }));

test("with durability flush too, a call whose prompt refers to a call the store lacks is not recorded", () =>
  withStore(async (store) => {
    await store.putRollout(testRolloutRecord({ id: "r1" }));
    const first = call(store, "r1", [1, 2, 3]);
    await store.putCall(first);
    dropStoredCall(store, "r1", first.seq);
    await assert.rejects(
      store.putCall(call(store, "r1", [1, 2, 3, 7, 8, 4])),
      new RegExp(`it refers to call ${first.seq}, which is not in the store`),
    );
    await store.putCall(call(store, "r1", [1, 2, 3, 7, 8, 4, 9]));
    assert.deepEqual(
      store.listCalls("r1").map((c) => c.promptTokenIds),
      [[1, 2, 3, 7, 8, 4, 9]],
    );
  }, "flush"));

test("rollout records are served from memory after a committed write, frozen", () =>
  withStore(async (store) => {
    const rollout = testRolloutRecord({ id: "r1", key: "rlk_x" });
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

test("two stores sharing one environment (gateway workers): distinct call numbers, commit-ordered finishes, one finish, catch-up", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-store-shared-"));
  const a = new Store({ path: dir, promptIndex: new PromptIndex(), shared: { slot: 0, slots: 2 } });
  const b = new Store({ path: dir, promptIndex: new PromptIndex(), shared: { slot: 1, slots: 2 } });
  try {
    const seqs = Array.from({ length: 2000 }, (_, i) => (i % 2 ? b : a).nextCallSeq());
    assert.equal(new Set(seqs).size, seqs.length, "no call number drawn twice");
    assert.ok(
      seqs.every((seq, i) => seq % 2 === i % 2),
      "each store draws its own slot's numbers",
    );

    const open: RolloutRecord = {
      id: "r1",
      key: "rlk_1",
      group: null,
      task: null,
      harness: null,
      metadata: {},
      policyVersion: null,
      status: "open",
      reward: null,
      createdAt: 1,
      finishedAt: null,
    };
    assert.equal(await a.putNewRollout(open), true);
    assert.equal(await b.putNewRollout({ ...open, key: "rlk_2" }), false, "created once");
    assert.equal(b.getRollout("r1")?.status, "open"); // now cached in b as open

    // Calls stored through a are seen by b's caches (the commit log), and nothing else.
    const first = call(a, "r1", [1, 2, 3]);
    await a.putCall(first);
    const seen = { seqs: new Set<number>(), mark: b.callLogMark("r1") - 1 };
    assert.deepEqual(b.unseenCalls("r1", seen), [first.seq]);
    assert.deepEqual(b.unseenCalls("r1", seen), [], "read once");
    assert.deepEqual(b.unseenCallRecords("r1", { seqs: new Set(), mark: 0 })[0]?.promptTokenIds, [1, 2, 3]);

    const cursor = await a.finishOpenRollout({ ...open, status: "ok", reward: 1, finishedAt: 2 });
    assert.ok(cursor !== null);
    assert.equal(b.listRollouts()[0]?.status, "ok", "b's listing too, its cache still holding the open record");
    assert.equal(b.getRollout("r1")?.status, "ok", "b's cached open record gives way to a's finish");
    assert.equal(b.callLogMark("r1"), 0, "a finished rollout's commit log is removed");
    assert.equal(await b.finishOpenRollout({ ...open, status: "ok", reward: 0, finishedAt: 3 }), null, "finished once");
    await b.putRollout({ ...open, id: "r2", key: "rlk_3" });
    const later = await b.finishRollout({ ...open, id: "r2", key: "rlk_3", status: "ok", reward: 1, finishedAt: 4 });
    assert.ok(later > cursor!, "finish cursors increase across the stores, in commit order");
    assert.deepEqual(
      a.finishedAfter(0).map((f) => f.rolloutId),
      ["r1", "r2"],
    );
  } finally {
    await a.close();
    await b.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
