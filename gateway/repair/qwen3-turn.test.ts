// The template mirror against the real Qwen3 chat template: for turns as vLLM returns them (thinking on and off, text
// before a tool call, tool calls only, plain answers), the message `faithfulText` builds renders exactly the sampled
// text, and `renderedHead` says what the real template writes for any message.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { renderChat, type ChatMessage } from "../../tokenizer/chat-template.ts";
import { faithfulText, renderedHead, sampledHead, type SampledTurn } from "./qwen3-turn.ts";

const TOOLS = [
  {
    type: "function",
    function: { name: "read_file", parameters: { type: "object", properties: { path: { type: "string" } } } },
  },
];
const CALL = { id: "call_0", type: "function", function: { name: "read_file", arguments: '{"path": "a.py"}' } };

/** What the real template writes for an earlier assistant turn, up to its first tool call (or its end). */
function realHead(message: ChatMessage): string {
  const text = renderChat(
    [{ role: "user", content: "go" }, message, { role: "tool", content: "ok", tool_call_id: "call_0" }],
    { tools: TOOLS },
  );
  const start = text.indexOf("<|im_start|>assistant\n") + "<|im_start|>assistant\n".length;
  const end = message.tool_calls?.length ? text.indexOf("<tool_call>", start) : text.indexOf("<|im_end|>", start);
  return text.slice(start, end);
}

const TURNS: Array<[string, SampledTurn]> = [
  [
    'tool call only (content "\\n\\n")',
    { reasoning: "\nRead it.\n", content: "\n\n", toolCalls: 1, thinkingOff: false },
  ],
  [
    "text before a tool call",
    { reasoning: "\nLook.\n", content: "\n\nLet me look.\n", toolCalls: 1, thinkingOff: false },
  ],
  ["plain answer", { reasoning: "\nDone.\n", content: "\n\nAll fixed.", toolCalls: 0, thinkingOff: false }],
  ["thinking off, tool call only", { reasoning: null, content: null, toolCalls: 1, thinkingOff: true }],
  [
    "thinking off, text before a tool call",
    { reasoning: null, content: "Checking.\n", toolCalls: 1, thinkingOff: true },
  ],
  ["thinking off, plain answer", { reasoning: null, content: "Hello there.", toolCalls: 0, thinkingOff: true }],
  ["no think block at all", { reasoning: null, content: "Sure.\n", toolCalls: 1, thinkingOff: false }],
];

function message(text: { reasoning: string | null; content: string }, toolCalls: number): ChatMessage {
  const m: ChatMessage = { role: "assistant", content: text.content };
  if (text.reasoning !== null) m.reasoning_content = text.reasoning;
  if (toolCalls) m.tool_calls = [CALL];
  return m;
}

describe("Qwen3 assistant turns", () => {
  for (const [name, turn] of TURNS) {
    test(`${name}: the repaired message renders the sampled text; the mirror agrees with the template`, () => {
      const fixed = faithfulText(turn);
      assert.ok(fixed !== null);
      assert.equal(realHead(message(fixed, turn.toolCalls)), sampledHead(turn));
      assert.equal(renderedHead({ ...fixed, toolCalls: turn.toolCalls }), sampledHead(turn));
      const asReturned = message({ reasoning: turn.reasoning, content: turn.content ?? "" }, turn.toolCalls);
      assert.equal(
        renderedHead({ reasoning: turn.reasoning, content: turn.content ?? "", toolCalls: turn.toolCalls }),
        realHead(asReturned),
      );
    });
  }

  test("a turn no message can reproduce gives null (text glued to <tool_call>, a newline the template strips)", () => {
    assert.equal(faithfulText({ reasoning: "\nx\n", content: "\n\nSee:", toolCalls: 1, thinkingOff: false }), null);
    assert.equal(faithfulText({ reasoning: "\nx\n", content: "\n\n\nHi", toolCalls: 0, thinkingOff: false }), null);
  });

  test("the mirror follows the template for reasoning written inside content", () => {
    const m: ChatMessage = { role: "assistant", content: "<think>\nHmm.\n</think>\n\nOk.\n", tool_calls: [CALL] };
    assert.equal(renderedHead({ reasoning: null, content: m.content as string, toolCalls: 1 }), realHead(m));
  });
});
