import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { deepSeekV31ChatFormat } from "../../tokenizer/model-format.ts";
import { DEEPSEEK_V31_TURN } from "./deepseek-v31-turn.ts";
import { templateTurnHead } from "./test-support.ts";

const { renderedHead, sampledHead, faithfulText } = DEEPSEEK_V31_TURN;

/**
 * What vLLM's V3.1 template writes for an assistant turn after a user turn: after its `<｜Assistant｜>` … `</think>`
 * and the spaces its indentation adds, before its calls or its end.
 */
function templateHead(content: string, toolCalls: number): string {
  const marks = {
    turnStart: "<｜Assistant｜>",
    opener: "</think>",
    callOpen: "<｜tool▁calls▁begin｜>",
    end: "<｜end▁of▁sentence｜>",
  };
  return templateTurnHead(deepSeekV31ChatFormat(), marks, content, toolCalls).replace(/^ */, "");
}

describe("DeepSeek V3.1 turn rules (history repair)", () => {
  test("renderedHead is what vLLM's template writes: content as it is, a text turn's cut after </think>", () => {
    for (const content of ["", "Done.", "Done.\n\n", "Let me look.\n", "r</think>Answer"])
      for (const toolCalls of [0, 1])
        assert.equal(
          renderedHead({ reasoning: null, content, toolCalls }),
          templateHead(content, toolCalls),
          JSON.stringify([content, toolCalls]),
        );
  });

  test("text as sampled is written back as it is; a thinking turn's reasoning cannot be", () => {
    const answer = { reasoning: null, content: "Let me look.\n", toolCalls: 1, thinkingOff: true };
    assert.equal(sampledHead(answer), "Let me look.\n");
    assert.deepEqual(faithfulText(answer), { reasoning: null, content: "Let me look.\n" });
    assert.deepEqual(faithfulText({ ...answer, content: null }), { reasoning: null, content: "" });
    // A harness that trims the text gets it put back: the rendered text differs from the sampled one.
    assert.notEqual(renderedHead({ reasoning: null, content: "Let me look.", toolCalls: 1 }), sampledHead(answer));
    assert.equal(faithfulText({ ...answer, reasoning: "Think.", thinkingOff: false }), null);
  });
});
