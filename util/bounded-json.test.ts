import assert from "node:assert/strict";
import { test } from "node:test";
import { boundedStringify, exceedsDepth, MAX_JSON_DEPTH, TOO_DEEP } from "./bounded-json.ts";

const nested = (depth: number): unknown => JSON.parse("[".repeat(depth) + "]".repeat(depth));

test("exceedsDepth counts container levels, at any depth without recursion", () => {
  assert.equal(exceedsDepth(nested(MAX_JSON_DEPTH)), false);
  assert.equal(exceedsDepth(nested(MAX_JSON_DEPTH + 1)), true);
  assert.equal(exceedsDepth(nested(1_000_000)), true);
  assert.equal(exceedsDepth({ a: [1, "x", { b: null }] }, 3), false);
  assert.equal(exceedsDepth({ a: [1, "x", { b: [] }] }, 3), true);
  assert.equal(exceedsDepth("text"), false);
});

test("boundedStringify writes what JSON.stringify writes, and replaces only the parts too deep to write", () => {
  const plain = { a: [1, { b: "c" }], d: null };
  assert.equal(boundedStringify(plain), JSON.stringify(plain));
  const deep = { id: "x", body: { toJSON: () => nested(50_000) }, ok: [1, 2] };
  assert.throws(() => JSON.stringify(deep), RangeError);
  const read = JSON.parse(boundedStringify(deep)) as { id: string; body: unknown; ok: number[] };
  assert.equal(read.id, "x");
  assert.deepEqual(read.ok, [1, 2]);
  let cursor: unknown = read.body;
  let depth = 0;
  while (Array.isArray(cursor)) {
    cursor = cursor[0];
    depth++;
  }
  assert.equal(cursor, TOO_DEEP);
  assert.equal(depth, MAX_JSON_DEPTH);
});
