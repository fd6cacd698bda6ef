// One upstream read's events leave as one write whose bytes are exactly the pieces' bytes in order, whichever form
// (text or bytes) each piece came in.
import assert from "node:assert/strict";
import { test } from "node:test";
import { WriteBatch } from "./write-batch.ts";

function bytesOf(taken: Buffer | string | null): Buffer {
  assert.notEqual(taken, null);
  return typeof taken === "string" ? Buffer.from(taken, "utf8") : taken!;
}

test("rewritten text and a short ASCII tail (the held [DONE]) leave as one string, byte for byte", () => {
  const batch = new WriteBatch();
  batch.add('data: {"text":"héllo ✓"}\n\n');
  batch.add(Buffer.from("data: [DONE]\n\n"));
  const taken = batch.take();
  assert.equal(typeof taken, "string");
  assert.deepEqual(bytesOf(taken), Buffer.from('data: {"text":"héllo ✓"}\n\ndata: [DONE]\n\n'));
  assert.equal(batch.take(), null);
});

test("upstream bytes that are not ASCII stay bytes: a split UTF-8 character is not re-encoded", () => {
  const batch = new WriteBatch();
  const check = Buffer.from("✓", "utf8");
  batch.add("data: a\n\n");
  batch.add(check.subarray(0, 2)); // half a character: as text it would become U+FFFD
  batch.add(check.subarray(2));
  assert.deepEqual(bytesOf(batch.take()), Buffer.concat([Buffer.from("data: a\n\n"), check]));
});

test("long upstream bytes pass through as they came, text before them is encoded once", () => {
  const batch = new WriteBatch();
  const passed = Buffer.from(`data: ${"x".repeat(200)}\n\n`);
  batch.add(passed);
  assert.equal(batch.take(), passed); // the same Buffer, not a copy
  batch.add("data: rewritten\n\n");
  batch.add(passed);
  assert.deepEqual(bytesOf(batch.take()), Buffer.concat([Buffer.from("data: rewritten\n\n"), passed]));
});
