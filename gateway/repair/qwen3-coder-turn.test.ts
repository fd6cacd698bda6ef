import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { qwen3CoderChatFormat } from "../../tokenizer/model-format.ts";
import { QWEN3_CODER_TURN } from "./qwen3-coder-turn.ts";
import { templateTurnHead } from "./test-support.ts";

const { renderedHead, sampledHead, faithfulText } = QWEN3_CODER_TURN;

/** What the real template writes after `<|im_start|>assistant` up to the first `<tool_call>` (or the turn's end). */
function templateHead(content: string | null, toolCalls: number): string {
  const opener = "<|im_start|>assistant";
  const marks = { turnStart: opener, opener, callOpen: "<tool_call>", end: "<|im_end|>" };
  return templateTurnHead(qwen3CoderChatFormat(), marks, content, toolCalls);
}

describe("Qwen3-Coder turn rules (history repair)", () => {
  test("renderedHead is what the real template writes, with and without tool calls", () => {
    for (const content of ["", "Let me look.", "  Let me look.\n\n", "\n"])
      for (const toolCalls of [0, 1, 2])
        assert.equal(
          renderedHead({ reasoning: null, content, toolCalls }),
          templateHead(content, toolCalls),
          JSON.stringify([content, toolCalls]),
        );
  });

  test("a sampled turn is written back from its content; a think block or text glued to <tool_call> cannot be", () => {
    const withText = { reasoning: null, content: "Let me look.\n\n", toolCalls: 1, thinkingOff: false };
    assert.deepEqual(faithfulText(withText), { reasoning: null, content: "Let me look.\n\n" });
    assert.equal(sampledHead(withText), "\nLet me look.\n\n");
    assert.deepEqual(faithfulText({ ...withText, content: null }), { reasoning: null, content: "" });
    assert.equal(faithfulText({ ...withText, content: "Look:" }), null);
    assert.equal(faithfulText({ ...withText, reasoning: "hm" }), null);
    const answer = { reasoning: null, content: "Done.\n", toolCalls: 0, thinkingOff: false };
    assert.equal(renderedHead({ reasoning: null, content: "Done.", toolCalls: 0 }) === sampledHead(answer), false);
    assert.deepEqual(faithfulText(answer), { reasoning: null, content: "Done.\n" });
  });
});
