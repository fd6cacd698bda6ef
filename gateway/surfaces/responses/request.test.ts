import assert from "node:assert/strict";
import { test } from "node:test";
import { GatewayError } from "../../errors.ts";
import { encodeReasoning } from "../../translate/carried-reasoning.ts";
import { inputMessages, parseResponsesRequest, toChatRequest } from "./request.ts";

test("reasoning, assistant text and function calls in a row become one assistant message; outputs become tool messages", () => {
  const messages = inputMessages([
    { role: "developer", content: "rules" },
    { type: "message", role: "user", content: [{ type: "input_text", text: "go" }] },
    { type: "reasoning", id: "rs_1", summary: [], content: [{ type: "reasoning_text", text: "hm" }] },
    { type: "message", role: "assistant", content: [{ type: "output_text", text: "ok", annotations: [] }] },
    { type: "function_call", call_id: "c1", name: "sh", arguments: '{"a":1}' },
    { type: "function_call", call_id: "c2", name: "sh", arguments: "{}" },
    { type: "function_call_output", call_id: "c1", output: "one" },
    { type: "function_call_output", call_id: "c2", output: [{ type: "input_text", text: "two" }] },
    { type: "reasoning", summary: [], encrypted_content: encodeReasoning("again") },
    { type: "function_call", call_id: "c3", name: "sh", arguments: "{}" },
  ]);
  assert.deepEqual(messages, [
    { role: "system", content: "rules" },
    { role: "user", content: "go" },
    {
      role: "assistant",
      content: "ok",
      reasoning: "hm",
      reasoning_content: "hm",
      tool_calls: [
        { id: "c1", type: "function", function: { name: "sh", arguments: '{"a":1}' } },
        { id: "c2", type: "function", function: { name: "sh", arguments: "{}" } },
      ],
    },
    { role: "tool", tool_call_id: "c1", content: "one" },
    { role: "tool", tool_call_id: "c2", content: "two" },
    {
      role: "assistant",
      content: "",
      reasoning: "again",
      reasoning_content: "again",
      tool_calls: [{ id: "c3", type: "function", function: { name: "sh", arguments: "{}" } }],
    },
  ]);
});

test("instructions lead, the previous conversation follows, and the request's options map to chat fields", () => {
  const request = parseResponsesRequest({
    model: "m",
    instructions: "be brief",
    input: "next",
    stream: true,
    tools: [{ type: "function", name: "sh", parameters: { type: "object" }, strict: true }],
    tool_choice: { type: "function", name: "sh" },
    max_output_tokens: 99,
    reasoning: { effort: "minimal" },
    text: { format: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true } },
  });
  const { chat, conversation, warnings } = toChatRequest(request, [{ role: "user", content: "before" }]);
  assert.deepEqual(warnings, []);
  assert.deepEqual(conversation, [
    { role: "user", content: "before" },
    { role: "user", content: "next" },
  ]);
  assert.deepEqual(chat, {
    model: "m",
    messages: [{ role: "system", content: "be brief" }, ...conversation],
    stream: true,
    stream_options: { include_usage: true },
    tools: [{ type: "function", function: { name: "sh", parameters: { type: "object" }, strict: true } }],
    tool_choice: { type: "function", function: { name: "sh" } },
    max_tokens: 99,
    response_format: { type: "json_schema", json_schema: { name: "out", schema: { type: "object" }, strict: true } },
    chat_template_kwargs: { enable_thinking: false },
  });
});

test("items that cannot be carried at all are refused by name", () => {
  const refused = (body: Record<string, unknown>, pattern: RegExp) =>
    assert.throws(
      () => toChatRequest(parseResponsesRequest({ model: "m", ...body }), []),
      (e: unknown) => e instanceof GatewayError && pattern.test(e.message),
    );
  refused({ input: [{ type: "item_reference", id: "x" }] }, /item_reference/);
  refused({ input: [{ role: "user", content: [{ type: "input_file", file_id: "f" }] }] }, /input_file/);
  assert.throws(() => parseResponsesRequest({ input: "x" }), /model/);
});
