// The trajectory's turn rules on DeepSeek V3.1's markup, where a turn has no single opener and closer: every role
// has its opener, a user turn no closer, and the model's turn after a tool result no opener (turn-marks.ts).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ChatMessage } from "../tokenizer/chat-template.ts";
import { deepSeekV31ChatFormat } from "../tokenizer/model-format.ts";
import { chatFormatOf, countTurns, divergesInSystemPrompt } from "./chat-format.ts";
import { GramIndex } from "./thread-rules.ts";

const model = deepSeekV31ChatFormat();
const format = chatFormatOf(model);
const ids = (messages: ChatMessage[]) => model.encode(model.render(messages));
const firstDifference = (a: number[], b: number[]) => {
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  return i;
};

const SUMMARY =
  "The work so far: the parts f1 to f5 were written, each holding its own digit, and all.txt was made of them in order; " +
  "the tests pass, the build is clean, and the only thing left is to report the result to the user in one sentence.";

describe("turn rules on DeepSeek V3.1's markup", () => {
  test("a system prompt ends where the first user turn opens", () => {
    const a = ids([
      { role: "system", content: "You are an agent." },
      { role: "user", content: "Do the task." },
    ]);
    const b = ids([
      { role: "system", content: "You are a sub-agent." },
      { role: "user", content: "Do the task." },
    ]);
    const c = ids([
      { role: "system", content: "You are an agent." },
      { role: "user", content: "Do another task." },
    ]);
    const none = ids([{ role: "user", content: "Do the task." }]);
    assert.equal(divergesInSystemPrompt(b, firstDifference(a, b), format), true);
    assert.equal(divergesInSystemPrompt(c, firstDifference(a, c), format), false);
    assert.equal(divergesInSystemPrompt(none, firstDifference(a, none), format), true);
  });

  test("every opener counts as a turn; the model's turn after a tool result has none", () => {
    const prompt = ids([
      { role: "user", content: "Do the task." },
      {
        role: "assistant",
        content: "Two at once.",
        tool_calls: [
          { id: "a", type: "function", function: { name: "f", arguments: "{}" } },
          { id: "b", type: "function", function: { name: "g", arguments: "{}" } },
        ],
      },
      { role: "tool", tool_call_id: "a", content: "one" },
      { role: "tool", tool_call_id: "b", content: "two" },
      { role: "assistant", content: "Done." },
      { role: "user", content: "Go on." },
    ]);
    // <｜User｜>, <｜Assistant｜>, two <｜tool▁output▁begin｜>, <｜User｜>, the generation prompt's <｜Assistant｜>.
    assert.equal(countTurns(prompt, format), 6);
  });

  test("text in the model's own turns (after a tool result too) is not a summary taken in; in a user turn it is", () => {
    const answered = ids([
      { role: "user", content: "Do the task." },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "a", type: "function", function: { name: "f", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "a", content: "one" },
      { role: "assistant", content: SUMMARY },
      { role: "user", content: "Summarize." },
    ]);
    const summary = model.encode(SUMMARY);
    assert.equal(new GramIndex(answered, format).holdsSummary(summary, 0, summary.length), false);
    // Read as if the model's turn needed an opener, that answer would sit in the tool result's turn.
    const noImplicitTurn = { ...format, turns: { ...format.turns, modelTurnAfter: [] } };
    assert.equal(new GramIndex(answered, noImplicitTurn).holdsSummary(summary, 0, summary.length), true);
    const handedOver = ids([{ role: "user", content: `Continue from this summary: ${SUMMARY}` }]);
    assert.equal(new GramIndex(handedOver, format).holdsSummary(summary, 0, summary.length), true);
  });
});
