// A rollout's sampled turns found by content: the first one sampled after the turn matched before it, whatever order
// the calls' records came in (a worker's own record can come by before another worker's earlier one).
import assert from "node:assert/strict";
import { test } from "node:test";
import { RolloutTurns, type RecordedTurn } from "./recorded-turns.ts";

function turn(callSeq: number, content = "Done."): RecordedTurn {
  return { callSeq, reasoning: null, content, toolCalls: 0, calls: [], thinkingOff: false };
}

test("identical turns are found in call order, added in any order", () => {
  const turns = new RolloutTurns();
  for (const seq of [5, 1, 9, 3, 7, 2, 8]) turns.add(turn(seq));
  const message = { role: "assistant", content: "  Done.\n" };
  const found: number[] = [];
  for (let after = -1; ;) {
    const next = turns.find(message, after);
    if (next === null) break;
    found.push(next.callSeq);
    after = next.callSeq;
  }
  assert.deepEqual(found, [1, 2, 3, 5, 7, 8, 9]);
  assert.equal(turns.find({ role: "assistant", content: "Other." }, -1), null);
});

test("a rollout of thousands of identical turns keeps them in call order", () => {
  const turns = new RolloutTurns();
  for (let seq = 0; seq < 5000; seq++) turns.add(turn(seq % 2 === 0 ? seq : 5000 - seq));
  const message = { role: "assistant", content: "Done." };
  assert.equal(turns.find(message, -1)?.callSeq, 0);
  assert.equal(turns.find(message, 2499)?.callSeq, 2500);
  assert.equal(turns.find(message, 4999), null);
});
