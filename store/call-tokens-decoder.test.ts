import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fromCallRecord, reconstructionToJson, reconstructRollout, type CallTokens } from "../trajectory/index.ts";
import type { CallRecord, RolloutRecord } from "./records.ts";
import { Store } from "./store.ts";
import { testCallRecord, testRolloutRecord } from "./test-support.ts";
import { PromptIndex } from "../trajectory/prompt-index.ts";

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function rollout(id: string): RolloutRecord {
  return testRolloutRecord({ id, key: `key-${id}` });
}

/**
 * A random agent session: each call continues an earlier call's prompt + sampled ids (an agent turn), repeats a prompt
 * (a retry), cuts an earlier sequence part-way and adds tokens (history re-rendered, a sub-agent), or has no prompt
 * ids at all; some calls sample n > 1 choices or none. Calls are stored in an order that differs from their call
 * numbers (concurrent calls finish out of order), so prompts also refer to calls with higher numbers.
 */
function session(random: () => number, store: Store, rolloutId: string, turns: number): CallRecord[] {
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 151_000));
  const sequences: number[][] = [];
  const calls: CallRecord[] = [];
  for (let t = 0; t < turns; t++) {
    const r = random();
    let prompt: number[] | null;
    if (sequences.length === 0 || r < 0.05) prompt = ids(1 + Math.floor(random() * 300));
    else {
      const base = sequences[Math.floor(random() * sequences.length)]!;
      if (r < 0.6) prompt = [...base, ...ids(Math.floor(random() * 200))];
      else if (r < 0.7) prompt = [...base];
      else if (r < 0.9)
        prompt = [...base.slice(0, Math.floor(random() * base.length)), ...ids(Math.floor(random() * 50))];
      else if (r < 0.95) prompt = base.slice(0, Math.floor(random() * base.length));
      else prompt = null;
    }
    const n = random() < 0.15 ? 2 + Math.floor(random() * 3) : random() < 0.05 ? 0 : 1;
    const choices = Array.from({ length: n }, (_, index) => {
      const sampled = ids(Math.floor(random() * 40));
      return {
        index,
        tokenIds: sampled,
        logprobs: sampled.map(() => Math.fround(-random() * 5)),
        finishReason: "stop",
      };
    });
    const call = testCallRecord({
      seq: store.nextCallSeq(),
      rolloutId,
      promptTokenIds: prompt,
      choices,
      tokenSource: prompt === null ? "missing" : "upstream",
      timings: { start: t, upstreamStart: t, firstByte: t, firstToken: null, end: t, overheadMs: 0 },
    });
    calls.push(call);
    if (prompt) for (const c of choices) sequences.push([...prompt, ...c.tokenIds]);
  }
  return calls;
}

/** Swaps neighbours now and then: the store sees calls finish out of call-number order. */
function finishOrder(random: () => number, calls: CallRecord[]): CallRecord[] {
  const order = [...calls];
  for (let i = 0; i + 1 < order.length; i++) if (random() < 0.2) [order[i], order[i + 1]] = [order[i + 1]!, order[i]!];
  return order;
}

function plain(call: CallTokens) {
  return {
    ...call,
    promptIds: call.promptIds && Array.from(call.promptIds),
    choices: call.choices.map((c) => ({
      ...c,
      tokenIds: c.tokenIds && Array.from(c.tokenIds),
      logprobs: c.logprobs && Array.from(c.logprobs),
    })),
  };
}

async function withStore(fn: (store: Store, dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-call-tokens-"));
  try {
    await fn(new Store({ path: dir, promptIndex: new PromptIndex() }), dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("listCallTokens gives every call's exact prompt, sampled ids and logprobs, as listCalls does", () =>
  withStore(async (store) => {
    for (let seed = 1; seed <= 12; seed++) {
      const random = rng(seed);
      const id = `r${seed}`;
      await store.putRollout(rollout(id));
      const calls = session(random, store, id, 60);
      for (const call of finishOrder(random, calls)) await store.putCall(call);
      const expected = calls.map(fromCallRecord).map(plain);
      const decoded = store.listCallTokens(id).map(plain);
      assert.deepEqual(decoded, expected, `seed ${seed}`);
      assert.deepEqual(store.listCalls(id).map(fromCallRecord).map(plain), expected, `seed ${seed} (listCalls)`);
      assert.deepEqual(
        reconstructionToJson(reconstructRollout(store.listCallTokens(id), { rolloutId: id, reward: 1 })),
        reconstructionToJson(reconstructRollout(calls.map(fromCallRecord), { rolloutId: id, reward: 1 })),
        `seed ${seed} (reconstruction)`,
      );
    }
    await store.close();
  }));

test("a long session's prompts share one buffer: decoding costs the unique tokens, not the sum of prompts", () =>
  withStore(async (store) => {
    await store.putRollout(rollout("long"));
    let prompt = Array.from({ length: 2000 }, (_, i) => i);
    const calls: CallRecord[] = [];
    for (let t = 0; t < 100; t++) {
      const sampled = Array.from({ length: 300 }, (_, i) => 10_000 + t * 300 + i);
      const call = testCallRecord({
        seq: store.nextCallSeq(),
        rolloutId: "long",
        promptTokenIds: prompt,
        choices: [{ index: 0, tokenIds: sampled, logprobs: null, finishReason: "stop" }],
      });
      calls.push(call);
      await store.putCall(call);
      prompt = [...prompt, ...sampled, ...Array.from({ length: 600 }, (_, i) => 50_000 + t * 600 + i)];
    }
    const decoded = store.listCallTokens("long");
    const buffers = new Set(decoded.map((c) => (c.promptIds as Int32Array).buffer));
    const bytes = [...buffers].reduce((sum, b) => sum + b.byteLength, 0);
    const sumOfPrompts = calls.reduce((sum, c) => sum + 4 * c.promptTokenIds!.length, 0);
    // ~90k unique ids; the buffers double as the session grows, so at most ~4× the unique tokens.
    assert.ok(bytes < sumOfPrompts / 10, `prompt buffers ${bytes} B for ${sumOfPrompts} B of prompts`);
    assert.deepEqual(Array.from(decoded[99]!.promptIds!), calls[99]!.promptTokenIds);
    await store.close();
  }));

test("after a restart, prompts stored against a prompt index rebuilt from the store decode exactly", () =>
  withStore(async (first, dir) => {
    const random = rng(99);
    await first.putRollout(rollout("r"));
    const calls = session(random, first, "r", 40);
    for (const call of calls.slice(0, 20)) await first.putCall(call);
    await first.close();
    const store = new Store({ path: dir, promptIndex: new PromptIndex() });
    // The next call of the open rollout rebuilds its prompt index from the stored calls' tokens.
    for (const call of calls.slice(20)) await store.putCall(call);
    assert.deepEqual(store.listCallTokens("r").map(plain), calls.map(fromCallRecord).map(plain));
    await store.close();
  }));
