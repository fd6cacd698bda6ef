import assert from "node:assert/strict";
import { test } from "node:test";
import { textTail } from "./text-tail.ts";

test("textTail: short texts whole; long ones from a line or word boundary, marked", () => {
  assert.equal(textTail("  short  ", 10), "short");
  // The reported cut: `the container could not start: onnection refused"`.
  const log = 'Error: dial tcp: connect: connection refused"';
  assert.equal(textTail(log, 18), '…refused"'); // slice(-18) is 'onnection refused"'
  assert.equal(textTail(log, 20), '…connection refused"');
  assert.equal(textTail("first line\nsecond line of the log", 28), "…second line of the log");
  assert.equal(textTail("x".repeat(30), 10), "x".repeat(30));
  assert.equal(textTail(`a ${"x".repeat(30)}`, 10), `…${"x".repeat(30)}`);
  for (const max of [5, 9, 17, 33]) {
    const tail = textTail(log, max).slice(1);
    assert.ok(log.endsWith(tail) && (tail === "" || /\s/.test(log[log.length - tail.length - 1]!)), tail);
  }
});
