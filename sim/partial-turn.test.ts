// A completions prompt that ends inside an assistant turn (a branch cut at a token position) is that turn continued:
// the exact rest when the decided turn starts with the given text, else the decided turn after their common start.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { FAMILIES } from "../tokenizer/families.ts";
import { tokenString } from "../tokenizer/token-text.ts";
import { generate } from "./generate.ts";
import { continueTurn, partialTurn } from "./partial-turn.ts";

const markup = FAMILIES.qwen3.markup;
const HEAD = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
const turn = { reasoning: "Look.", content: "", toolCalls: [{ name: "shell", arguments: { command: "ls" } }] };

describe("a turn continued from a partial answer", () => {
  test("partialTurn: the prompt's head and the given text; none at a generation header or after a turn's end", () => {
    assert.deepEqual(partialTurn(`${HEAD}<think>\nLo`, markup), { head: HEAD, text: "<think>\nLo" });
    assert.equal(partialTurn(HEAD, markup), null);
    assert.equal(partialTurn(`${HEAD}done<|im_end|>\n`, markup), null);
    assert.equal(partialTurn("plain text", markup), null);
    // Thinking off: the empty think block is the head's, the answer after it the given text.
    const off = `${HEAD}<think>\n\n</think>\n\n`;
    assert.deepEqual(partialTurn(`${off}Hel`, markup), { head: off, text: "Hel" });
  });

  test("partialTurn: a harmony turn from its first assistant message; a DeepSeek V3.1 turn after a tool output", () => {
    const harmony = "<|start|>user<|message|>hi<|end|><|start|>assistant";
    const analysis = "<|channel|>analysis<|message|>Look.<|end|>";
    const cut = `${analysis}<|start|>assistant<|channel|>commentary to=functions.sh`;
    assert.deepEqual(partialTurn(`${harmony}${cut}`, FAMILIES.gptoss.markup), { head: harmony, text: cut });
    assert.equal(
      partialTurn(
        `${harmony}${analysis}<|start|>assistant<|channel|>final<|message|>ok<|return|>`,
        FAMILIES.gptoss.markup,
      ),
      null,
    );
    const deepseek =
      "<｜User｜>hi<｜Assistant｜></think>ok<｜end▁of▁sentence｜><｜tool▁output▁begin｜>x<｜tool▁output▁end｜>";
    assert.deepEqual(partialTurn(`${deepseek}Do`, FAMILIES.deepseekV31.markup), { head: deepseek, text: "Do" });
    assert.equal(partialTurn(`${deepseek}Done<｜end▁of▁sentence｜>`, FAMILIES.deepseekV31.markup), null);
  });

  test("continueTurn: the decided turn's ids after the given ones, a tool call across the cut included", () => {
    const whole = generate(turn, { maxTokens: 1000, stopToken: 151645 });
    for (const cut of [1, 5, whole.ids.length - 3]) {
      const given = whole.pieces.slice(0, cut).join("");
      const rest = continueTurn(whole, given, 1000, tokenString);
      assert.deepEqual(rest.ids, whole.ids.slice(cut), `cut ${cut}`);
      assert.equal(given + rest.text, whole.text);
      assert.equal(rest.finishReason, "stop");
    }
    const short = continueTurn(whole, whole.pieces.slice(0, 2).join(""), 3, tokenString);
    assert.deepEqual([short.ids.length, short.finishReason], [3, "length"]);
  });

  test("continueTurn: text the decided turn does not start with is followed by its tail after their common start", () => {
    const whole = generate(turn, { maxTokens: 1000, stopToken: 151645 });
    const rest = continueTurn(whole, `${whole.pieces[0]!}something else`, 1000, tokenString);
    assert.deepEqual(rest.ids, whole.ids.slice(1));
  });
});
