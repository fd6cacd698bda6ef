import assert from "node:assert/strict";
import { test } from "node:test";
import { ResponsesEncoder } from "./encoder.ts";
import { inputMessages, parseResponsesRequest, toChatRequest } from "./request.ts";

// The tools Codex 0.171 sends (shapes as captured from its first request), trimmed to what the mapping reads.
const CODEX_TOOLS = [
  {
    type: "function",
    name: "exec_command",
    strict: false,
    parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] },
  },
  {
    type: "namespace",
    name: "multi_agent_v1",
    description: "Tools for spawning and managing sub-agents.",
    tools: [
      {
        type: "function",
        name: "spawn_agent",
        strict: false,
        parameters: { type: "object", properties: { message: { type: "string" } } },
      },
      { type: "function", name: "wait_agent", parameters: { type: "object", properties: {} } },
    ],
  },
  {
    type: "custom",
    name: "apply_patch",
    description: "Edit files.",
    format: { type: "grammar", syntax: "lark", definition: "start: patch" },
  },
  { type: "local_shell" },
  { type: "web_search", external_web_access: true },
  { type: "image_generation" },
];

function translate(input: unknown[], tools: unknown[] = CODEX_TOOLS) {
  return toChatRequest(parseResponsesRequest({ model: "m", input, tools, tool_choice: "auto" }), []);
}

test("Codex's tools reach a chat upstream as functions; hosted ones are dropped with a warning each", () => {
  const { chat, warnings } = translate([{ role: "user", content: "go" }]);
  const names = (chat["tools"] as any[]).map((t) => t.function.name);
  assert.deepEqual(names, [
    "exec_command",
    "multi_agent_v1__spawn_agent",
    "multi_agent_v1__wait_agent",
    "apply_patch",
    "local_shell",
  ]);
  const patch = (chat["tools"] as any[])[3].function;
  assert.deepEqual(patch.parameters.required, ["input"]);
  assert.match(patch.parameters.properties.input.description, /lark grammar:\nstart: patch/);
  assert.equal(warnings.length, 2);
  assert.match(warnings[0]!, /tools\.4: hosted tool 'web_search' dropped/);
  assert.match(warnings[1]!, /tools\.5: hosted tool 'image_generation' dropped/);
});

test("the model's calls come back as the items Codex knows, and those items go upstream again as the same calls", () => {
  const request = parseResponsesRequest({ model: "m", input: "go", tools: CODEX_TOOLS, stream: true });
  const { tools } = toChatRequest(request, []);
  const encoder = new ResponsesEncoder(request, tools);
  const calls = [
    { id: "c1", name: "multi_agent_v1__spawn_agent", arguments: '{"message":"hi"}' },
    { id: "c2", name: "apply_patch", arguments: JSON.stringify({ input: "*** Begin Patch\n*** End Patch" }) },
    { id: "c3", name: "local_shell", arguments: '{"command":["ls","-la"],"workdir":"/w"}' },
  ];
  let frames = "";
  calls.forEach(
    (call, index) =>
      (frames += encoder.chunk({
        choices: [
          {
            index: 0,
            delta: {
              tool_calls: [
                { index, id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } },
              ],
            },
          },
        ],
      })),
  );
  frames += encoder.chunk({ choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] });
  frames += encoder.finish().frames;
  assert.match(frames, /response\.custom_tool_call_input\.done/);
  const output = encoder.snapshot()["output"] as any[];
  assert.deepEqual(
    output.map((item) => [item.type, item.name, item.namespace]),
    [
      ["function_call", "spawn_agent", "multi_agent_v1"],
      ["custom_tool_call", "apply_patch", undefined],
      ["local_shell_call", undefined, undefined],
    ],
  );
  assert.equal(output[1].input, "*** Begin Patch\n*** End Patch");
  assert.deepEqual(output[2].action, {
    type: "exec",
    command: ["ls", "-la"],
    timeout_ms: null,
    working_directory: "/w",
    env: null,
    user: null,
  });

  // Codex sends those items back, with their outputs: the upstream sees the calls the model made.
  const history = inputMessages(
    [
      ...output,
      { type: "function_call_output", call_id: "c1", output: "spawned" },
      { type: "custom_tool_call_output", call_id: "c2", output: "patched" },
      { type: "function_call_output", call_id: "c3", output: "files" },
    ],
    { tools },
  );
  const sent = history[0]!["tool_calls"] as any[];
  assert.deepEqual(
    sent.map((c) => c.function.name),
    calls.map((c) => c.name),
  );
  assert.deepEqual(
    sent.map((c) => JSON.parse(c.function.arguments)),
    calls.map((c) => JSON.parse(c.arguments)),
  );
  assert.deepEqual(
    history.slice(1).map((m) => [m["role"], m["tool_call_id"], m["content"]]),
    [
      ["tool", "c1", "spawned"],
      ["tool", "c2", "patched"],
      ["tool", "c3", "files"],
    ],
  );
});

test("items hosted tools left in the history are dropped with a warning; the rest of the turn goes on", () => {
  const { chat, warnings } = translate([
    { role: "user", content: "look it up" },
    { type: "web_search_call", id: "ws_1", status: "completed", action: { type: "search", query: "q" } },
    { type: "message", role: "assistant", content: [{ type: "output_text", text: "found" }] },
    {
      type: "function_call_output",
      call_id: "x",
      output: [
        { type: "input_text", text: "t" },
        { type: "input_image", image_url: "data:image/png;base64,AA" },
      ],
    },
  ]);
  assert.deepEqual(chat["messages"], [
    { role: "user", content: "look it up" },
    { role: "assistant", content: "found" },
    { role: "tool", tool_call_id: "x", content: "t" },
  ]);
  assert.equal(warnings.length, 4, warnings.join("\n"));
  assert.match(warnings[2]!, /input\.1: 'web_search_call' item dropped/);
  assert.match(warnings[3]!, /input\.3\.output: parts other than text dropped/);
});

test("a tool_choice naming a namespaced or custom tool names its function; one naming a hosted tool becomes auto", () => {
  const choose = (tool_choice: unknown) =>
    toChatRequest(parseResponsesRequest({ model: "m", input: "x", tools: CODEX_TOOLS, tool_choice }), []).chat[
      "tool_choice"
    ];
  assert.deepEqual(choose({ type: "function", name: "spawn_agent", namespace: "multi_agent_v1" }), {
    type: "function",
    function: { name: "multi_agent_v1__spawn_agent" },
  });
  assert.deepEqual(choose({ type: "custom", name: "apply_patch" }), {
    type: "function",
    function: { name: "apply_patch" },
  });
  assert.equal(choose({ type: "web_search" }), "auto");
});
