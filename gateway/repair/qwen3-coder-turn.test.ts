import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { qwen3CoderChatFormat } from "../../tokenizer/model-format.ts";
import { QWEN3_CODER_TURN } from "./qwen3-coder-turn.ts";

const { renderedHead, sampledHead, faithfulText } = QWEN3_CODER_TURN;

/** What the real template writes after `<|im_start|>assistant` up to the first `<tool_call>` (or the turn's end). */
function templateHead(content: string | null, toolCalls: number): string {
  const calls = Array.from({ length: toolCalls }, (_, i) => ({
    id: `c${i}`,
    function: { name: "f", arguments: "{}" },
  }));
  const text = qwen3CoderChatFormat().render(
    [
      { role: "user", content: "u" },
      { role: "assistant", content, ...(toolCalls ? { tool_calls: calls } : {}) },
      { role: "user", content: "next" },
    ],
    { addGenerationPrompt: false },
  );
  const start = text.indexOf("<|im_start|>assistant") + "<|im_start|>assistant".length;
  const end = toolCalls ? text.indexOf("<tool_call>", start) : text.indexOf("<|im_end|>", start);
  return text.slice(start, end);
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
