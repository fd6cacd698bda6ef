import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { qwen3ChatFormat } from "../../tokenizer/model-format.ts";
import { renderFull, renderSuffix, renderSuffixText } from "./render.ts";

const TOOLS = [
  {
    type: "function",
    function: { name: "read", parameters: { type: "object", properties: { path: { type: "string" } } } },
  },
];
const call = (id: string, path: string) => ({
  id,
  type: "function",
  function: { name: "read", arguments: `{"path": "${path}"}` },
});

/** What Qwen3 samples for an assistant turn (as the sim writes it), ended by <|im_end|>. */
function sampled(reasoning: string | null, content: string, calls: ReturnType<typeof call>[]): number[] {
  const format = qwen3ChatFormat();
  let text = reasoning === null ? "" : `<think>\n${reasoning}\n</think>\n\n`;
  text += content;
  calls.forEach((c, i) => {
    if (i > 0 || content) text += "\n";
    text += `<tool_call>\n{"name": "read", "arguments": ${c.function.arguments}}\n</tool_call>`;
  });
  return [...format.encode(text), format.turnEnd.id];
}

describe("token-mode rendering of only the new messages", () => {
  const format = qwen3ChatFormat();
  const base = [
    { role: "system", content: "You are an agent." },
    { role: "user", content: "Read a and b." },
  ];

  test("earlier prompt + sampled ids + suffix = a fresh whole rendering when nothing was re-serialized (Qwen3)", () => {
    const settings = { tools: TOOLS, enableThinking: undefined };
    const answer1 = {
      role: "assistant",
      content: "",
      reasoning: "Both.",
      tool_calls: [call("c1", "a"), call("c2", "b")],
    };
    const added1 = [
      { role: "tool", tool_call_id: "c1", content: "A" },
      { role: "tool", tool_call_id: "c2", content: "B" },
    ];
    const prompt1 = renderFull(format, base, settings);
    const prompt2 = [
      ...prompt1,
      ...sampled("Both.", "", answer1.tool_calls),
      ...renderSuffix(format, answer1, added1, settings),
    ];
    assert.deepEqual(prompt2, renderFull(format, [...base, answer1, ...added1], settings));

    const answer2 = {
      role: "assistant",
      content: "Now c.",
      reasoning: "One more.",
      tool_calls: [call("c3", "c")],
    };
    const added2 = [{ role: "tool", tool_call_id: "c3", content: "C" }];
    const prompt3 = [
      ...prompt2,
      ...sampled("One more.", "Now c.", answer2.tool_calls),
      ...renderSuffix(format, answer2, added2, settings),
    ];
    assert.deepEqual(prompt3, renderFull(format, [...base, answer1, ...added1, answer2, ...added2], settings));
  });

  test("a user turn after an answer without reasoning renders as the whole conversation does", () => {
    const settings = { tools: null, enableThinking: false };
    const answer = { role: "assistant", content: "Hello." };
    const added = [{ role: "user", content: "And now?" }];
    const prompt1 = renderFull(format, base, settings);
    const prompt2 = [
      ...prompt1,
      ...format.encode("Hello."),
      format.turnEnd.id,
      ...renderSuffix(format, answer, added, settings),
    ];
    // Thinking off: the earlier generation prompt's empty think block stays where the model saw it; a whole
    // rendering drops it (the re-serialization tokens mode avoids), and the rest is the same.
    const whole = renderFull(format, [...base, answer, ...added], settings);
    const emptyThink = format.encode("<think>\n\n</think>\n\n");
    assert.deepEqual([...prompt1.slice(0, -emptyThink.length), ...prompt2.slice(prompt1.length)], whole);
  });

  test("the suffix is the new turns and the generation prompt, after the earlier turn's end", () => {
    const text = renderSuffixText(
      format,
      { role: "assistant", content: "x", reasoning_content: "r" },
      [{ role: "user", content: "next" }],
      {
        tools: null,
        enableThinking: undefined,
      },
    );
    assert.equal(text, "\n<|im_start|>user\nnext<|im_end|>\n<|im_start|>assistant\n");
  });
});
