// The charts' per-second series: log bins that read back within 9 %, windows of whole seconds with empty ones kept,
// calls and finishes added up in memory and written once, and two stores on one environment (gateway workers)
// adding to the same seconds.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { sweepRetention } from "./retention.ts";
import { binOf, binValue } from "./series.ts";
import { Store } from "./store.ts";
import { testCallRecord, testRolloutRecord } from "./test-support.ts";

const T = Date.UTC(2026, 0, 1, 12, 0, 0);

test("a value read back from its bin is within 9 % of it, from microseconds to minutes", () => {
  for (const ms of [0.0013, 0.02, 0.31, 1, 7.7, 250, 12_345, 600_000]) {
    const back = binValue(binOf(ms));
    assert.ok(Math.abs(back - ms) / ms <= 0.09, `${ms} → ${back}`);
  }
  assert.equal(binOf(0), 0);
  assert.equal(binOf(-1), 0);
});

test("windows: whole seconds up to the one that holds `to`, empty ones kept; percentiles from the histograms", async () => {
  const store = new Store({ path: mkdtempSync(join(tmpdir(), "rlgate-series-")) });
  try {
    const call = (seq: number, at: number, overheadMs: number, status: "ok" | "upstream_error" = "ok") =>
      store.putCall(
        testCallRecord({
          seq,
          status,
          promptTokenIds: [1, 2, 3],
          choices: [{ index: 0, tokenIds: [4, 5], logprobs: [0, 0], finishReason: "stop" }] as any,
          timings: { start: at, upstreamStart: at, firstByte: at, firstToken: null, end: at + 100, overheadMs },
        }),
      );
    // 99 calls in the first second with 0.1 ms overhead, one slow one; one failed call 3 s later.
    await Promise.all([
      ...Array.from({ length: 99 }, (_, i) => call(i + 1, T + 10, 0.1)),
      call(100, T + 20, 50),
      call(101, T + 3000, 0.2, "upstream_error"),
    ]);
    await store.finishRollout(testRolloutRecord({ id: "a", status: "ok", reward: 1, finishedAt: T + 3500 }));
    await store.finishRollout(testRolloutRecord({ id: "b", status: "ok", reward: 0, finishedAt: T + 3900 }));
    assert.equal(store.lastActivity(), T + 3000);

    const seconds = store.series(T + 4999, 1000, 5);
    assert.deepEqual(
      seconds.map((p) => [p.at - T, p.calls, p.errors, p.finished, p.rewardMean]),
      [
        [0, 100, 0, 0, null],
        [1000, 0, 0, 0, null],
        [2000, 0, 0, 0, null],
        [3000, 1, 1, 2, 0.5],
        [4000, 0, 0, 0, null],
      ],
    );
    const first = seconds[0]!;
    assert.equal(first.promptTokens, 300);
    assert.equal(first.sampledTokens, 200);
    assert.ok(Math.abs(first.overheadP50! - 0.1) <= 0.009, String(first.overheadP50));
    assert.ok(Math.abs(first.overheadP99! - 0.1) <= 0.009, "the 99th of 100 is still a fast one");
    assert.ok(Math.abs(first.latencyP50! - 100) <= 9);
    assert.equal(seconds[1]!.overheadP50, null);
    // Two-second windows merge their seconds.
    const pairs = store.series(T + 3999, 2000, 2);
    assert.deepEqual(
      pairs.map((p) => [p.at - T, p.calls, p.finished]),
      [
        [0, 100, 0],
        [2000, 1, 2],
      ],
    );
    // Windows of whole minutes come from the minutes table: the same figures.
    const minute = store.series(T + 59_999, 60_000, 1)[0]!;
    assert.deepEqual([minute.at, minute.calls, minute.errors, minute.finished, minute.rewardMean], [T, 101, 1, 2, 0.5]);
    assert.equal(minute.overheadP50, first.overheadP50);
  } finally {
    await store.close();
  }
});

test("gateway workers on one store add to the same seconds", async () => {
  const path = mkdtempSync(join(tmpdir(), "rlgate-series-shared-"));
  const a = new Store({ path, shared: { slot: 0, slots: 2 } });
  const b = new Store({ path, shared: { slot: 1, slots: 2 } });
  try {
    const timings = { start: T, upstreamStart: T, firstByte: T, firstToken: null, end: T + 5, overheadMs: 0.2 };
    for (const store of [a, b])
      await store.putCall(testCallRecord({ seq: store.nextCallSeq(), promptTokenIds: [1], choices: [], timings }));
    // Each flushes its own second's count into what the other wrote.
    assert.equal(a.series(T, 1000, 1)[0]!.calls, 1);
    assert.equal(b.series(T, 1000, 1)[0]!.calls, 2);
    assert.equal(a.series(T, 1000, 1)[0]!.calls, 2);
  } finally {
    await a.close();
    await b.close();
  }
});

test("retention removes the seconds older than its window, and keeps the rest", async () => {
  const store = new Store({ path: mkdtempSync(join(tmpdir(), "rlgate-series-retain-")) });
  try {
    const day = 24 * 3600_000;
    const at = (start: number, seq: number) =>
      store.putCall(
        testCallRecord({
          seq,
          promptTokenIds: [1],
          choices: [],
          timings: { start, upstreamStart: start, firstByte: start, firstToken: null, end: start + 1, overheadMs: 0.1 },
        }),
      );
    await at(T - 8 * day, 1);
    await at(T - 1000, 2);
    assert.equal(store.series(T - 8 * day, 1000, 1)[0]!.calls, 1);
    const swept = await sweepRetention(store.tables(), 7 * day, T);
    assert.equal(swept.seriesSeconds, 1);
    assert.equal(store.series(T - 8 * day, 1000, 1)[0]!.calls, 0);
    assert.equal(store.series(T - 1000, 1000, 1)[0]!.calls, 1);
  } finally {
    await store.close();
  }
});
