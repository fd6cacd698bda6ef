// The control API's rollout listing at the scale of a run (thousands of rollouts): pages newest first through a
// cursor, a search and filters answered from the store with the total that match, and the charts' series from what
// the store holds (calls, tokens, overhead, latency, rewards), so a page opened after the calls sees them.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { testRolloutRecord } from "../store/test-support.ts";
import { playAgent, postJson, startStack, type Stack } from "./helpers.ts";

const TOKEN = "paging-token";
const auth = { authorization: `Bearer ${TOKEN}` };
const STORED = 450;
const T0 = Date.UTC(2026, 0, 1);

describe("rollout paging, search and series", () => {
  let stack: Stack;
  const get = async (path: string) => {
    const res = await fetch(`${stack.gateway.url}${path}`, { headers: auth });
    return { status: res.status, body: (await res.json()) as any };
  };

  before(async () => {
    stack = await startStack({ gateway: { controlToken: TOKEN } });
    // Written through the store: a run's worth of rollouts in milliseconds. r-0 is the oldest.
    const store = stack.gateway.context.store;
    await Promise.all(
      Array.from({ length: STORED }, (_, i) =>
        store.putRollout(
          testRolloutRecord({
            id: `r-${i}`,
            group: `task-${i % 9}`,
            harness: i === 7 ? "needle-harness" : "qwen-code",
            task: `fix bug ${i}`,
            createdAt: T0 + i,
          }),
        ),
      ),
    );
    const r3 = store.getRollout("r-3")!;
    await store.finishRollout({ ...r3, status: "ok", reward: 1, finishedAt: Date.now() });
  });
  after(() => stack?.close());

  test("pages of 200 go through every rollout once, newest first, with the store's total", async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const { status, body } = await get(`/api/rollouts?limit=200${cursor ? `&cursor=${cursor}` : ""}`);
      assert.equal(status, 200);
      assert.equal(body.total, STORED);
      seen.push(...body.rollouts.map((r: { id: string }) => r.id));
      cursor = body.next_cursor;
      pages++;
    } while (cursor);
    assert.equal(pages, 3);
    assert.deepEqual(
      seen,
      Array.from({ length: STORED }, (_, i) => `r-${STORED - 1 - i}`),
    );
  });

  test("a search finds a rollout far outside the first page, counted, and filters combine with it", async () => {
    const needle = await get("/api/rollouts?limit=200&q=NEEDLE");
    assert.equal(needle.body.total, 1);
    assert.deepEqual(
      needle.body.rollouts.map((r: { id: string }) => r.id),
      ["r-7"],
    );
    assert.equal(needle.body.next_cursor, null);
    // task-4 holds r-4, r-13, …: 50 of them, in pages of 20.
    const first = await get("/api/rollouts?limit=20&q=task-4");
    assert.equal(first.body.total, 50);
    assert.equal(first.body.rollouts.length, 20);
    const second = await get(`/api/rollouts?limit=20&q=task-4&cursor=${first.body.next_cursor}`);
    assert.equal(second.body.rollouts[0].id, `r-${first.body.rollouts[19].id.slice(2) - 9}`);
    const finished = await get("/api/rollouts?status=ok");
    assert.equal(finished.body.total, 1, "the index follows a finish");
    assert.equal(finished.body.rollouts[0].id, "r-3");
    // r-3, r-30…r-39 and r-300…r-399, less the finished r-3.
    assert.equal((await get("/api/rollouts?status=open&q=r-3")).body.total, 110);
    const bad = await get("/api/rollouts?cursor=nonsense");
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, "cursor");
  });

  test("the series holds the calls and rewards the store committed, for a page that opens afterwards", async () => {
    const before = (await get("/api/series?window_s=60")).body;
    const callsBefore = before.points.reduce((n: number, p: { calls: number }) => n + p.calls, 0);
    const created = await postJson(`${stack.gateway.url}/api/rollouts`, { group: "series" }, auth);
    const rollout = created.json as { id: string; key: string; base_urls: { openai: string } };
    await playAgent(rollout.base_urls.openai, 3, true, { authorization: `Bearer ${rollout.key}` });
    await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 0.5 }, auth);

    const { status, body } = await get("/api/series?window_s=60&points=60");
    assert.equal(status, 200);
    assert.equal(body.step_ms, 1000);
    assert.equal(body.points.length, 60);
    const sum = (field: string) => body.points.reduce((n: number, p: any) => n + p[field], 0);
    assert.equal(sum("calls") - callsBefore, 3);
    assert.ok(sum("sampled_tokens") > 0 && sum("prompt_tokens") > 0);
    const busy = body.points.filter((p: any) => p.calls > 0);
    for (const p of busy) {
      assert.ok(p.overhead_p50 > 0 && p.overhead_p99 >= p.overhead_p50, JSON.stringify(p));
      assert.ok(p.latency_p99 >= p.latency_p50, JSON.stringify(p));
    }
    // r-3 finished with reward 1 in the window too: the mean over finished rollouts with a reward.
    const rewarded = body.points.filter((p: any) => p.finished > 0);
    const finishedCount = rewarded.reduce((n: number, p: any) => n + p.finished, 0);
    assert.equal(finishedCount, 2);
    const meanOfMeans = rewarded.map((p: any) => p.reward_mean);
    assert.ok(meanOfMeans.includes(0.5) || meanOfMeans.includes(0.75), JSON.stringify(meanOfMeans));
    assert.equal(body.last_activity, body.points.filter((p: any) => p.calls || p.finished).at(-1).at);
    assert.equal((await get("/api/series?window_s=0")).status, 400);
  });
});
