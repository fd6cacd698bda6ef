// Retention removes exactly the rollouts that are finished, acknowledged by every consumer group and older than the
// window — every trace of them — and nothing else: open, unacknowledged and recent rollouts, and a backbone while a
// branch of it is open, stay whole (their calls read back through their prompt and body references).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { PromptIndex } from "../trajectory/prompt-index.ts";
import { RawJson, type CallRecord, type RolloutRecord } from "./records.ts";
import { retentionPreview, sweepRetention } from "./retention.ts";
import { Store } from "./store.ts";
import { testCallRecord, testRolloutRecord } from "./test-support.ts";

/** An agent's calls: each prompt continues the last prompt and answer, each body the last body (stored as references). */
async function agentRollout(store: Store, record: RolloutRecord, turns = 3): Promise<CallRecord[]> {
  await store.putRollout(record);
  const calls: CallRecord[] = [];
  let prompt = [1, 2, 3, record.id.length];
  const messages: Array<{ role: string; content: string }> = [{ role: "system", content: "s".repeat(3000) }];
  for (let turn = 0; turn < turns; turn++) {
    messages.push({ role: "user", content: `turn ${turn} of ${record.id} ${"u".repeat(500)}` });
    const body = JSON.stringify({ model: "m", messages });
    const sampled = [100 + turn, 200 + turn];
    const call = testCallRecord({
      seq: store.nextCallSeq(),
      rolloutId: record.id,
      requestReceived: new RawJson(body),
      requestForwarded: new RawJson(body),
      promptTokenIds: prompt,
      choices: [{ index: 0, tokenIds: sampled, logprobs: [-0.5, -0.25], finishReason: "stop" }],
    });
    await store.putCall(call);
    calls.push(call);
    prompt = [...prompt, ...sampled, 9, 9];
    messages.push({ role: "assistant", content: `answer ${turn}` });
  }
  return calls;
}

async function finish(store: Store, id: string): Promise<number> {
  const record = store.getRollout(id)!;
  return store.finishRollout({ ...record, status: "ok", reward: 1, finishedAt: Date.now() });
}

function ack(store: Store, consumer: string, committed: number): Promise<void> {
  return store.writeConsumerState(consumer, { committed, leases: new Map(), acked: new Map(), affinity: new Map() });
}

/** Waits for the clock to pass `ms`, so what finishes next has a later cursor than the window's edge. */
function after(ms: number): void {
  while (Date.now() <= ms) {
    // spin: at most a millisecond
  }
}

function assertGone(store: Store, record: RolloutRecord): void {
  const t = store.tables();
  assert.equal(store.getRollout(record.id), undefined, `${record.id}: record`);
  assert.equal(store.rolloutIdForKey(record.key), undefined, `${record.id}: key`);
  assert.equal(store.countCalls(record.id), 0, `${record.id}: calls`);
  assert.equal(store.finishCursor(record.id), null, `${record.id}: finish cursor`);
  assert.ok(!store.listRollouts().some((r) => r.id === record.id), `${record.id}: listed`);
  assert.ok(!store.finishedAfter(0, 1000).some((e) => e.rolloutId === record.id), `${record.id}: finished log`);
  assert.ok(!t.rolloutsByTime.doesExist([record.createdAt, record.id]), `${record.id}: by-time index`);
  assert.deepEqual(
    [...t.branches.getKeys({ start: [record.id] as unknown as [string, string] })].filter(
      (k) => k[0] === record.id || k[1] === record.id,
    ),
    [],
    `${record.id}: branch index`,
  );
}

function assertWhole(store: Store, record: RolloutRecord, calls: readonly CallRecord[]): void {
  assert.ok(store.getRollout(record.id), `${record.id}: record`);
  assert.equal(store.rolloutIdForKey(record.key), record.id, `${record.id}: key`);
  const stored = store.listCalls(record.id);
  assert.deepEqual(
    stored.map((c) => [c.seq, c.promptTokenIds, c.requestReceived]),
    calls.map((c) => [c.seq, c.promptTokenIds, (c.requestReceived as RawJson).value()]),
    `${record.id}: every call reads back`,
  );
}

test("retention removes finished, acknowledged, old rollouts whole, and keeps open, unacknowledged, recent ones and backbones of open branches", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-retention-"));
  const store = new Store({ path: dir, promptIndex: new PromptIndex() });
  try {
    const rec = (id: string, extra: Partial<RolloutRecord> = {}) =>
      testRolloutRecord({ id, createdAt: Date.now(), ...extra });
    const rollouts = {
      acked: rec("acked"),
      backbone: rec("backbone"),
      ackedByOne: rec("acked-by-one"),
      unacked: rec("unacked"),
      recent: rec("recent"),
      open: rec("open"),
    };
    const calls = new Map<string, CallRecord[]>();
    for (const r of Object.values(rollouts)) calls.set(r.id, await agentRollout(store, r));
    const ackedCursor = await finish(store, "acked");
    await finish(store, "backbone");
    const ackedByOneCursor = await finish(store, "acked-by-one");
    await finish(store, "unacked");
    const branch = rec("branch", { metadata: { branch: { of: "backbone", at_call: 1, call_seq: 0, seed: 1 } } });
    calls.set("branch", await agentRollout(store, branch, 1));
    const unattributed = testCallRecord({ seq: store.nextCallSeq(), promptTokenIds: [1], choices: [] });
    await store.putCall(unattributed);
    after(Date.now()); // the stamps drawn so far are of earlier milliseconds than the edge
    const edge = Date.now();
    after(edge);
    await finish(store, "recent");
    const recentUnattributed = testCallRecord({ seq: store.nextCallSeq(), promptTokenIds: [2], choices: [] });
    await store.putCall(recentUnattributed);
    const window = 60_000;
    const now = edge + window; // the window's edge falls between "unacked" and "recent"
    const t = store.tables();

    // No consumer group has read the store: nothing of a rollout is acknowledged, nothing removed but old
    // unattributed calls (nobody consumes those).
    let swept = await sweepRetention(t, window, now);
    assert.equal(swept.rollouts, 0);
    assert.equal(swept.unattributedCalls, 1);
    assert.equal(store.getCall(null, unattributed.seq), undefined);
    assert.ok(store.getCall(null, recentUnattributed.seq), "a recent unattributed call stays");

    // Two consumer groups: "cores" acknowledged up to acked-by-one, "eval" only up to acked.
    await ack(store, "cores", ackedByOneCursor);
    await ack(store, "eval", ackedCursor);
    const preview = retentionPreview(t, window, now);
    assert.deepEqual(
      { rollouts: preview.rollouts, calls: preview.calls, heldBy: preview.horizon.heldBy },
      { rollouts: 1, calls: 3, heldBy: "eval" },
    );
    swept = await sweepRetention(t, window, now);
    assert.deepEqual(
      { rollouts: swept.rollouts, calls: swept.calls, heldBy: swept.heldBy },
      preview && {
        rollouts: 1,
        calls: 3,
        heldBy: "eval",
      },
    );
    assertGone(store, rollouts.acked);
    for (const r of [rollouts.backbone, rollouts.ackedByOne, rollouts.unacked, rollouts.recent, rollouts.open, branch])
      assertWhole(store, r, calls.get(r.id)!);

    // "eval" catches up: acked-by-one goes; the backbone stays while its branch is open.
    await ack(store, "eval", ackedByOneCursor);
    swept = await sweepRetention(t, window, now);
    assert.deepEqual({ rollouts: swept.rollouts, kept: swept.keptBackbones }, { rollouts: 1, kept: 1 });
    assertGone(store, rollouts.ackedByOne);
    assertWhole(store, rollouts.backbone, calls.get("backbone")!);

    // The branch finishes: its backbone goes at the next sweep; the branch itself is recent and unacknowledged.
    await finish(store, "branch");
    swept = await sweepRetention(t, window, now);
    assert.deepEqual({ rollouts: swept.rollouts, kept: swept.keptBackbones }, { rollouts: 1, kept: 0 });
    assertGone(store, rollouts.backbone);
    for (const r of [rollouts.unacked, rollouts.recent, rollouts.open, branch]) assertWhole(store, r, calls.get(r.id)!);

    // Everything acknowledged and a later clock: every finished rollout goes, the open one never.
    const last = store.finishedAfter(0, 1000).at(-1)!.cursor;
    await ack(store, "cores", last);
    await ack(store, "eval", last);
    swept = await sweepRetention(t, window, Date.now() + 2 * window);
    assert.equal(swept.rollouts, 3);
    for (const r of [rollouts.unacked, rollouts.recent, branch]) assertGone(store, r);
    assertWhole(store, rollouts.open, calls.get("open")!);
    assert.deepEqual(
      store.listRollouts().map((r) => r.id),
      ["open"],
    );
    assert.equal(t.calls.getCount(), 3, "only the open rollout's calls are left");
    assert.equal(t.finished.getCount(), 0);
    assert.equal(t.finishedIds.getCount(), 0);
    assert.equal(t.keys.getCount(), 1);

    // The open rollout takes calls and finishes as before; its prompts are still stored as references.
    const more = await agentRollout(store, { ...rollouts.open }, 2);
    assertWhole(store, rollouts.open, [...calls.get("open")!, ...more]);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a rollout with more calls than a transaction takes goes over several, newest first: what is left always reads whole", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-retention-"));
  const store = new Store({ path: dir, promptIndex: new PromptIndex() });
  try {
    const record = testRolloutRecord({ id: "long", createdAt: Date.now() });
    await store.putRollout(record);
    let prompt = [1, 2, 3];
    for (let turn = 0; turn < 150; turn++) {
      const sampled = [100 + turn];
      await store.putCall(
        testCallRecord({
          seq: store.nextCallSeq(),
          rolloutId: "long",
          promptTokenIds: prompt,
          choices: [{ index: 0, tokenIds: sampled, logprobs: [-1], finishReason: "stop" }],
        }),
      );
      prompt = [...prompt, ...sampled, 7];
    }
    const all = store.listCalls("long").map((c) => c.promptTokenIds);
    assert.equal(all.length, 150);
    const cursor = await finish(store, "long");
    await ack(store, "cores", cursor);

    // A reader between the sweep's transactions sees a prefix of the calls, each decoded through its references.
    let sweeping = true;
    const seen = new Set<number>();
    const reader = (async () => {
      while (sweeping) {
        const left = store.listCalls("long").map((c) => c.promptTokenIds);
        assert.deepEqual(left, all.slice(0, left.length));
        seen.add(left.length);
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    const swept = await sweepRetention(store.tables(), 0, Date.now() + 1);
    sweeping = false;
    await reader;
    assert.deepEqual({ rollouts: swept.rollouts, calls: swept.calls }, { rollouts: 1, calls: 150 });
    assert.ok(swept.transactions >= 3, `${swept.transactions} transactions`);
    assert.ok(
      [...seen].some((n) => n > 0 && n < 150),
      `a partly removed rollout was read: ${[...seen].join(", ")}`,
    );
    assert.equal(store.getRollout("long"), undefined);
    assert.equal(store.tables().calls.getCount(), 0);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
