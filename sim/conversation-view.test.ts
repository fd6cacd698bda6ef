import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ChatMessage } from "../tokenizer/chat-template.ts";
import { builtInChatFormat, FAMILIES } from "../tokenizer/model-format.ts";
import { viewFromChat, viewFromPromptText } from "./conversation.ts";

const SHELL = {
  type: "function",
  function: {
    name: "bash",
    description: "Run a command",
    parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
  },
};

// Qwen Code's shape: a reply the harness wrote to its startup context, then the task, a call, its result.
const OPENED: ChatMessage[] = [
  { role: "user", content: "CONTEXT" },
  { role: "assistant", content: "Got it." },
  { role: "user", content: "TASK" },
  {
    role: "assistant",
    content: "",
    tool_calls: [{ id: "c1", type: "function", function: { name: "bash", arguments: { command: "ls" } } }],
  },
  { role: "tool", tool_call_id: "c1", content: "OUT" },
];
const LATER: ChatMessage[] = [...OPENED, { role: "assistant", content: "Done." }, { role: "user", content: "MORE" }];

describe("a conversation's view: the opening is the user messages before the first tool result, in every family", () => {
  const readers: [string, (messages: ChatMessage[]) => ReturnType<typeof viewFromChat>][] = [
    ["chat messages", (messages) => viewFromChat(messages, [SHELL], undefined, undefined)],
    ...[FAMILIES.qwen3, FAMILIES.qwen3Coder, FAMILIES.llama3, FAMILIES.gptoss, FAMILIES.deepseekV31].map(
      (family) =>
        [
          `${family.toolParser} prompt`,
          (messages: ChatMessage[]) =>
            viewFromPromptText(builtInChatFormat(family).render(messages, { tools: [SHELL] }), family.markup),
        ] as [string, (messages: ChatMessage[]) => ReturnType<typeof viewFromChat>],
    ),
  ];
  for (const [name, read] of readers) {
    test(name, () => {
      const opened = read(OPENED);
      assert.equal(opened.chatShaped, true);
      assert.equal(opened.openingUserText, "CONTEXT\nTASK", "a harness's own reply before the task");
      assert.equal(opened.lastUserText, "TASK");
      assert.deepEqual(opened.toolResults, ["OUT"]);
      assert.equal(opened.assistantTurns, 2);
      assert.deepEqual(
        opened.tools.map((t) => t.name),
        ["bash"],
      );
      const later = read(LATER);
      assert.equal(later.openingUserText, "CONTEXT\nTASK", "a user message after a tool result");
      assert.equal(later.lastUserText, "MORE");
      assert.deepEqual(later.toolResults, []);
      assert.equal(later.assistantTurns, 3);
    });
  }
});
