import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { llama3ChatFormat } from "../../tokenizer/model-format.ts";
import { LLAMA3_TURN } from "./llama3-turn.ts";
import { templateTurnHead } from "./test-support.ts";

const { renderedHead, sampledHead, faithfulText } = LLAMA3_TURN;
const HEADER = "<|start_header_id|>assistant<|end_header_id|>\n\n";

/** What Llama's real template writes for an assistant turn, after its header and before its call or its end. */
function templateHead(content: string, toolCalls: number): string {
  const marks = { turnStart: HEADER, opener: HEADER, callOpen: '{"name"', end: "<|eot_id|>" };
  return templateTurnHead(llama3ChatFormat(), marks, content, toolCalls);
}

describe("Llama 3.x turn rules (history repair)", () => {
  test("renderedHead is what the real template writes: a text answer trimmed, a turn with a call its call alone", () => {
    for (const content of ["", "Done.", "  Done.\n\n", "Let me look.\n"])
      for (const toolCalls of [0, 1])
        assert.equal(
          renderedHead({ reasoning: null, content, toolCalls }),
          templateHead(content, toolCalls),
          JSON.stringify([content, toolCalls]),
        );
  });

  test("a trimmed text answer or a call is written back as sampled; text with surrounding whitespace cannot be", () => {
    const answer = { reasoning: null, content: "Done.", toolCalls: 0, thinkingOff: false };
    assert.deepEqual(faithfulText(answer), { reasoning: null, content: "Done." });
    assert.equal(faithfulText({ ...answer, content: "Done.\n" }), null);
    const call = { reasoning: null, content: null, toolCalls: 1, thinkingOff: false };
    assert.equal(sampledHead(call), "");
    assert.deepEqual(faithfulText(call), { reasoning: null, content: "" });
  });
});
