// Request bodies stored against earlier ones of their rollout read back byte for byte: in order, alone, after the
// store is reopened, with agents interleaved and histories rewritten; chains stay short; a failed commit leaves no
// reference to a call that is not stored.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { PromptIndex } from "../trajectory/prompt-index.ts";
import { CallDecoder, encodeCall } from "./call-codec.ts";
import { RawJson } from "./records.ts";
import { BodyReader, MAX_BODY_DEPTH, RequestBases, sharedPrefixLength, type StoredBody } from "./request-bodies.ts";
import { Store } from "./store.ts";
import { testCallRecord, testRolloutRecord } from "./test-support.ts";

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Agents' growing conversations as request bodies: each turn appends messages, some rewrite earlier ones. */
function agentBodies(count: number, seed: number): Array<{ agent: number; bytes: Buffer }> {
  const rand = rng(seed);
  const agents: unknown[][] = [0, 1, 2].map((a) => [
    { role: "system", content: `agent ${a}: ${"rules. ".repeat(300)}` },
  ]);
  const out: Array<{ agent: number; bytes: Buffer }> = [];
  for (let i = 0; i < count; i++) {
    const agent = rand() < 0.7 ? 0 : 1 + Math.floor(rand() * 2);
    const messages = agents[agent]!;
    const kind = rand();
    if (kind < 0.94) messages.push({ role: "user", content: `step ${i} ${"x".repeat(Math.floor(rand() * 400))}` });
    else if (kind < 0.97 && messages.length > 2)
      messages.splice(1, Math.floor(messages.length / 2)); // compacted
    else if (messages.length > 1) messages[messages.length - 1] = { role: "user", content: `edited ${i}` };
    out.push({ agent, bytes: Buffer.from(JSON.stringify({ model: "m", messages, max_tokens: 64 })) });
  }
  return out;
}

describe("request bodies against earlier ones", () => {
  test("the shared start of two byte strings, as a byte loop finds it", () => {
    const rand = rng(1);
    for (let i = 0; i < 2000; i++) {
      const a = Buffer.from(Array.from({ length: Math.floor(rand() * 300) }, () => Math.floor(rand() * 3)));
      const b = rand() < 0.5 ? Buffer.concat([a.subarray(0, Math.floor(rand() * a.length)), Buffer.from([9])]) : a;
      let expected = 0;
      while (expected < Math.min(a.length, b.length) && a[expected] === b[expected]) expected++;
      assert.equal(sharedPrefixLength(a, b), expected);
    }
  });

  test("read back byte for byte in order and alone; agent turns stored as their rest; chains bounded", () => {
    const bases = new RequestBases();
    const stored = new Map<number, StoredBody>();
    const bodies = agentBodies(400, 2);
    let whole = 0;
    let storedBytes = 0;
    bodies.forEach(({ bytes }, seq) => {
      const { stored: body, remember } = bases.plan("r", seq, bytes);
      remember();
      stored.set(seq, body);
      if (body instanceof Uint8Array) whole++;
      else assert.ok(body.depth <= MAX_BODY_DEPTH);
      storedBytes += body instanceof Uint8Array ? body.length : body.tail.length;
    });
    const totalBytes = bodies.reduce((sum, b) => sum + b.bytes.length, 0);
    assert.ok(storedBytes < totalBytes / 5, `${storedBytes} of ${totalBytes} bytes stored`);
    assert.ok(whole < 80, `${whole} bodies stored whole`);
    const inOrder = new BodyReader((seq) => stored.get(seq));
    bodies.forEach(({ bytes }, seq) => assert.deepEqual(Buffer.from(inOrder.bytes(seq, stored.get(seq)!)), bytes));
    const rand = rng(3);
    for (let k = 0; k < 200; k++) {
      const seq = Math.floor(rand() * bodies.length);
      const alone = new BodyReader((s) => stored.get(s));
      assert.deepEqual(Buffer.from(alone.bytes(seq, stored.get(seq)!)), bodies[seq]!.bytes);
    }
  });

  test("a body that refers to a call not stored is an error, not other bytes", () => {
    const bases = new RequestBases();
    const first = Buffer.from(`{"messages":"${"a".repeat(2000)}"}`);
    bases.plan("r", 1, first).remember();
    const second = bases.plan("r", 2, Buffer.from(`{"messages":"${"a".repeat(2000)}b"}`)).stored;
    assert.ok(!(second instanceof Uint8Array));
    assert.throws(() => new BodyReader(() => undefined).bytes(2, second), /refers to call 1, which is not stored/);
    const short = new BodyReader(() => first.subarray(0, 100));
    assert.throws(() => short.bytes(2, second), /shorter than referred to/);
    bases.forget("r");
    const third = bases.plan("r", 3, first);
    assert.ok(third.stored instanceof Uint8Array, "after a failed commit: stored whole");
    third.remember();
    const again = bases.plan("r", 3, first).stored;
    assert.ok(again instanceof Uint8Array, "a call stored again does not refer to itself");
    bases.plan("r", 4, first); // not remembered: its record did not encode
    const fifth = bases.plan("r", 5, first).stored;
    assert.ok(!(fifth instanceof Uint8Array) && fifth.seq === 3, "refers to a call that was stored");
  });
});

describe("in the store", () => {
  const rollout = testRolloutRecord({ id: "r1" });

  test("an agent's calls read back as received, before and after the store is reopened", async () => {
    const dir = mkdtempSync(join(tmpdir(), "rlgate-bodies-"));
    const bodies = agentBodies(120, 4);
    try {
      let store = new Store({ path: dir, promptIndex: new PromptIndex() });
      await store.putRollout(rollout);
      const seqs: number[] = [];
      for (const [i, { bytes }] of bodies.entries()) {
        const received = new RawJson(bytes);
        const seq = store.nextCallSeq();
        seqs.push(seq);
        const put = store.putCall(
          testCallRecord({
            seq,
            rolloutId: "r1",
            requestReceived: received,
            requestForwarded: received,
            promptTokenIds: [1, 2, 3],
            choices: [{ index: 0, tokenIds: [7], logprobs: [-0.5], finishReason: "stop" }],
          }),
        );
        if (i % 3 !== 0) await put; // others commit with the next ones, in one transaction
      }
      const check = (s: Store) => {
        assert.deepEqual(
          s.listCalls("r1").map((c) => JSON.stringify(c.requestReceived)),
          bodies.map((b) => JSON.stringify(JSON.parse(b.bytes.toString()))),
        );
        for (const k of [119, 0, 57, 118, 3]) {
          const got = s.getCall("r1", seqs[k]!)!;
          assert.equal(JSON.stringify(got.requestReceived), JSON.stringify(JSON.parse(bodies[k]!.bytes.toString())));
          assert.deepEqual(got.requestForwarded, got.requestReceived);
        }
      };
      check(store);
      await store.close();
      store = new Store({ path: dir, promptIndex: new PromptIndex() });
      check(store);
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test("another worker catching up reads the bodies only if asked, and then exactly", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-bodies-shared-"));
  const a = new Store({ path: dir, promptIndex: new PromptIndex(), shared: { slot: 0, slots: 2 } });
  const b = new Store({ path: dir, promptIndex: new PromptIndex(), shared: { slot: 1, slots: 2 } });
  try {
    await a.putNewRollout(testRolloutRecord({ id: "r1" }));
    const bodies = agentBodies(40, 5);
    for (const { bytes } of bodies) {
      const received = new RawJson(bytes);
      await a.putCall(
        testCallRecord({
          seq: a.nextCallSeq(),
          rolloutId: "r1",
          requestReceived: received,
          requestForwarded: received,
          promptTokenIds: [1, 2, 3],
          choices: [{ index: 0, tokenIds: [7], logprobs: [-0.5], finishReason: "stop" }],
        }),
      );
    }
    const caughtUp = b.unseenCallRecords("r1", { seqs: new Set(), mark: 0 });
    assert.equal(caughtUp.length, bodies.length);
    // Read in reverse (each one alone, through its references), as JSON and as keys in the record's order.
    for (let k = caughtUp.length - 1; k >= 0; k--) {
      const expected = JSON.parse(bodies[k]!.bytes.toString()) as unknown;
      assert.deepEqual(caughtUp[k]!.requestReceived, expected);
      assert.deepEqual(caughtUp[k]!.requestForwarded, expected);
    }
    assert.equal(JSON.stringify(caughtUp), JSON.stringify(b.listCalls("r1")));
  } finally {
    await a.close();
    await b.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a record decoded with bodies when read resolves none until one is read", () => {
  const record = testCallRecord({ seq: 2, rolloutId: "r1", promptTokenIds: null, choices: [] });
  const stored = encodeCall(record, null, { seq: 1, length: 10, tail: Buffer.from("}"), depth: 1 });
  const decoder = new CallDecoder(() => undefined, undefined, { bodiesWhenRead: true });
  const decoded = decoder.decode(stored); // call 1 is not there: nothing has read it yet
  assert.ok(Object.keys(decoded).includes("requestReceived"));
  assert.throws(() => decoded.requestReceived, /refers to call 1, which is not stored/);
  assert.throws(() => new CallDecoder(() => undefined).decode(stored), /refers to call 1/);
});
