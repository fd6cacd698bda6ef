import assert from "node:assert/strict";
import { test } from "node:test";
import { GatewayError } from "../../errors.ts";
import { parseMessagesRequest, toChatRequest } from "./request.ts";

const translate = (body: Record<string, unknown>) =>
  toChatRequest(parseMessagesRequest({ model: "m", max_tokens: 10, ...body }));

test("tool results become tool messages before the rest of their user turn; images become image_url parts", () => {
  const chat = translate({
    system: [
      { type: "text", text: "A" },
      { type: "text", text: "B", cache_control: { type: "ephemeral" } },
    ],
    messages: [
      { role: "user", content: "go" },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "hm", signature: "s" },
          { type: "text", text: "ok" },
          { type: "tool_use", id: "t1", name: "sh", input: { c: 1 } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "out" }] },
          { type: "text", text: "and this" },
          { type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } },
        ],
      },
    ],
  });
  assert.deepEqual(chat["messages"], [
    {
      role: "system",
      content: [
        { type: "text", text: "A" },
        { type: "text", text: "B" },
      ],
    },
    { role: "user", content: "go" },
    {
      role: "assistant",
      content: "ok",
      reasoning: "hm",
      reasoning_content: "hm",
      tool_calls: [{ id: "t1", type: "function", function: { name: "sh", arguments: '{"c":1}' } }],
    },
    { role: "tool", tool_call_id: "t1", content: "out" },
    {
      role: "user",
      content: [
        { type: "text", text: "and this" },
        { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
      ],
    },
  ]);
});

test("tools, tool_choice, thinking, stop sequences and sampling map to their chat counterparts", () => {
  const chat = translate({
    messages: [{ role: "user", content: "x" }],
    stream: true,
    tools: [{ name: "sh", description: "shell", input_schema: { type: "object" }, eager_input_streaming: true }],
    tool_choice: { type: "any", disable_parallel_tool_use: true },
    thinking: { type: "enabled", budget_tokens: 1024 },
    stop_sequences: ["END"],
    temperature: 0.5,
    top_k: 20,
    metadata: { user_id: "u" },
  });
  assert.deepEqual(chat, {
    model: "m",
    messages: [{ role: "user", content: "x" }],
    max_tokens: 10,
    stream: true,
    stream_options: { include_usage: true },
    tools: [{ type: "function", function: { name: "sh", parameters: { type: "object" }, description: "shell" } }],
    tool_choice: "required",
    parallel_tool_calls: false,
    stop: ["END"],
    temperature: 0.5,
    top_k: 20,
    chat_template_kwargs: { enable_thinking: true },
  });
  assert.deepEqual(
    translate({
      messages: [{ role: "user", content: "x" }],
      tools: [{ name: "a", input_schema: {} }],
      tool_choice: { type: "tool", name: "a" },
    })["tool_choice"],
    {
      type: "function",
      function: { name: "a" },
    },
  );
});

test("what the upstream cannot take is dropped with a warning naming it; the rest of the request goes on", () => {
  const warnings: string[] = [];
  const chat = toChatRequest(
    parseMessagesRequest({
      model: "m",
      max_tokens: 10,
      thinking: { type: "adaptive" },
      tools: [
        { name: "Read", input_schema: { type: "object" }, cache_control: { type: "ephemeral" } },
        { type: "web_search_20250305", name: "web_search", max_uses: 5 },
        { type: "bash_20250124", name: "bash" },
      ],
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "look", cache_control: { type: "ephemeral" } },
            { type: "container_upload", file_id: "f" },
          ],
        },
        {
          role: "assistant",
          content: [
            { type: "server_tool_use", id: "s1", name: "web_search", input: { query: "q" } },
            { type: "web_search_tool_result", tool_use_id: "s1", content: [] },
            { type: "tool_use", id: "t", name: "Read", input: { path: "a" } },
          ],
        },
        {
          role: "user",
          content: [
            {
              type: "tool_result",
              tool_use_id: "t",
              content: [
                { type: "text", text: "seen" },
                { type: "image", source: { type: "base64", data: "AA" } },
              ],
            },
          ],
        },
      ],
    }),
    warnings,
  );
  assert.deepEqual(
    (chat["tools"] as any[]).map((t) => t.function.name),
    ["Read"],
  );
  assert.deepEqual(chat["chat_template_kwargs"], { enable_thinking: true });
  assert.deepEqual(chat["messages"], [
    { role: "user", content: "look" },
    {
      role: "assistant",
      content: "",
      tool_calls: [{ id: "t", type: "function", function: { name: "Read", arguments: '{"path":"a"}' } }],
    },
    { role: "tool", tool_call_id: "t", content: "seen" },
  ]);
  assert.equal(warnings.length, 6, warnings.join("\n"));
  for (const name of [
    "web_search_20250305",
    "bash_20250124",
    "container_upload",
    "server_tool_use",
    "web_search_tool_result",
    "'image' block inside tool_result",
  ]) {
    assert.ok(
      warnings.some((w) => w.includes(name)),
      name,
    );
  }
});

test("what is malformed is refused by name", () => {
  const refused = (body: Record<string, unknown>, pattern: RegExp) =>
    assert.throws(
      () => translate(body),
      (e: unknown) => e instanceof GatewayError && e.status === 400 && pattern.test(e.message),
    );
  refused({ messages: [{ role: "tool", content: "x" }] }, /messages\.0\.role/);
  refused(
    { messages: [{ role: "system", content: [{ type: "image", source: {} }] }] },
    /messages\.0\.content\.0: system blocks must be text/,
  );
  refused(
    { messages: [{ role: "user", content: [{ type: "image", source: { type: "file" } }] }] },
    /base64 or url source/,
  );
  assert.throws(() => parseMessagesRequest({ model: "m", messages: [] }), /max_tokens/);
  assert.doesNotThrow(() => parseMessagesRequest({ model: "m", messages: [] }, { countOnly: true }));
});

test("system messages among the turns (Claude Code 2.1) stay system messages in place", () => {
  const chat = translate({
    system: "rules",
    messages: [
      { role: "user", content: "hi" },
      { role: "system", content: [{ type: "text", text: "Available agent types: claude" }] },
      { role: "assistant", content: "ok" },
    ],
  });
  assert.deepEqual(chat["messages"], [
    { role: "system", content: "rules" },
    { role: "user", content: "hi" },
    { role: "system", content: "Available agent types: claude" },
    { role: "assistant", content: "ok" },
  ]);
});

test("server-side features without a chat counterpart (context editing, MCP servers, containers) are named in warnings", () => {
  const warnings: string[] = [];
  toChatRequest(
    parseMessagesRequest({
      model: "m",
      max_tokens: 10,
      messages: [{ role: "user", content: "hi" }],
      context_management: { edits: [{ type: "clear_tool_uses_20250919" }] },
      mcp_servers: [{ type: "url", url: "https://example.invalid/mcp", name: "x" }],
    }),
    warnings,
  );
  assert.equal(warnings.length, 2, warnings.join("\n"));
  assert.match(warnings[0]!, /context_management: edits not applied \(clear_tool_uses_20250919\)/);
  assert.match(warnings[1]!, /mcp_servers/);
  const none: string[] = [];
  toChatRequest(
    parseMessagesRequest({
      model: "m",
      max_tokens: 10,
      messages: [{ role: "user", content: "hi" }],
      context_management: { edits: [] },
    }),
    none,
  );
  assert.deepEqual(none, []);
});
