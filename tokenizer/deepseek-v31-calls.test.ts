// Golden tests of the deepseek_v31 tool-call syntax against outputs written the way vLLM's DeepSeekV31ToolParser
// reads them (vllm/entrypoints/openai/tool_parsers/deepseekv31_tool_parser.py): its regex, the content before
// `<｜tool▁calls▁begin｜>`, arguments as written.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { deepSeekToolCallSpans, extractDeepSeekToolCalls, writeDeepSeekToolCalls } from "./deepseek-v31-calls.ts";
import { streamDeltas, type TokenDelta } from "./output-parser.ts";

const BEGIN = "<｜tool▁calls▁begin｜>";
const END = "<｜tool▁calls▁end｜>";
const call = (name: string, args: string) => `<｜tool▁call▁begin｜>${name}<｜tool▁sep｜>${args}<｜tool▁call▁end｜>`;

/** What the stream's deltas add up to, the text cut into the pieces given. */
function streamed(pieces: string[]): { content: string; calls: Array<{ name: string; arguments: string }> } {
  const fullText = pieces.join("");
  const deltas = streamDeltas(
    { ids: pieces.map((_, i) => i), pieces, fullText, toolCalls: deepSeekToolCallSpans(fullText) },
    true,
    null,
  );
  let content = "";
  const calls: Array<{ name: string; arguments: string }> = [];
  for (const delta of deltas.filter((d): d is TokenDelta => d !== null)) {
    content += delta.content ?? "";
    for (const d of delta.toolCalls ?? []) {
      calls[d.index] ??= { name: "", arguments: "" };
      if (d.name !== undefined) calls[d.index]!.name = d.name;
      calls[d.index]!.arguments += d.arguments ?? "";
    }
  }
  return { content, calls };
}

describe("deepseek_v31 tool calls (vLLM's DeepSeekV31ToolParser)", () => {
  test("text without <｜tool▁calls▁begin｜> is all content", () => {
    assert.deepEqual(extractDeepSeekToolCalls("Done: all.txt holds 12345."), {
      toolCalls: [],
      content: "Done: all.txt holds 12345.",
    });
    // A call block without the calls opener is not read either.
    const stray = `See ${call("shell", '{"command": "ls"}')}`;
    assert.deepEqual(extractDeepSeekToolCalls(stray), { toolCalls: [], content: stray });
  });

  test("text before a call is content; the call's name and arguments are as written", () => {
    const text = `Let me look.${BEGIN}${call("shell", '{"command":"ls -la"}')}${END}`;
    assert.deepEqual(extractDeepSeekToolCalls(text), {
      toolCalls: [{ name: "shell", arguments: '{"command":"ls -la"}' }],
      content: "Let me look.",
    });
  });

  test("a call with nothing before it has null content", () => {
    const text = `${BEGIN}${call("read", '{"path": "a.txt"}')}${END}`;
    assert.deepEqual(extractDeepSeekToolCalls(text), {
      toolCalls: [{ name: "read", arguments: '{"path": "a.txt"}' }],
      content: null,
    });
  });

  test("parallel calls chained without separators are each a call, in order", () => {
    const text = `Two at once.${BEGIN}${call("shell", '{"command": "ls"}')}${call("shell", '{"command": "pwd"}')}${END}`;
    assert.deepEqual(extractDeepSeekToolCalls(text).toolCalls, [
      { name: "shell", arguments: '{"command": "ls"}' },
      { name: "shell", arguments: '{"command": "pwd"}' },
    ]);
  });

  test("text after the calls is dropped", () => {
    const text = `${BEGIN}${call("f", "{}")}${END} and more`;
    assert.deepEqual(extractDeepSeekToolCalls(text), { toolCalls: [{ name: "f", arguments: "{}" }], content: null });
  });

  test("malformed: no whole call reports no call and the text before the block; a newline breaks a call", () => {
    const cut = `Running it.${BEGIN}<｜tool▁call▁begin｜>shell<｜tool▁sep｜>{"command": "l`;
    assert.deepEqual(extractDeepSeekToolCalls(cut), { toolCalls: [], content: "Running it." });
    const noSep = `${BEGIN}<｜tool▁call▁begin｜>shell {"command": "ls"}<｜tool▁call▁end｜>${END}`;
    assert.deepEqual(extractDeepSeekToolCalls(noSep), { toolCalls: [], content: null });
    // Python's `.` stops at a newline: pretty-printed arguments are not a call.
    const multiline = `${BEGIN}${call("shell", '{\n  "command": "ls"\n}')}${call("f", "{}")}${END}`;
    assert.deepEqual(extractDeepSeekToolCalls(multiline).toolCalls, [{ name: "f", arguments: "{}" }]);
  });

  test("arguments that are not JSON are reported as written", () => {
    const text = `${BEGIN}${call("shell", "ls -la")}${END}`;
    assert.deepEqual(extractDeepSeekToolCalls(text).toolCalls, [{ name: "shell", arguments: "ls -la" }]);
  });

  test("a stream's deltas add up to the whole text's message: content first, a name at its separator", () => {
    const pieces = [
      "Two ",
      "at once.",
      BEGIN,
      "<｜tool▁call▁begin｜>",
      "shell",
      "<｜tool▁sep｜>",
      '{"command": ',
      '"ls"}',
      "<｜tool▁call▁end｜>",
      "<｜tool▁call▁begin｜>",
      "read",
      "<｜tool▁sep｜>",
      '{"path": "a"}',
      "<｜tool▁call▁end｜>",
      END,
    ];
    const whole = extractDeepSeekToolCalls(pieces.join(""));
    const stream = streamed(pieces);
    assert.equal(stream.content, whole.content);
    assert.deepEqual(stream.calls, whole.toolCalls);
    // The name goes out with the separator's token, not before.
    const spans = deepSeekToolCallSpans(pieces.join(""));
    assert.equal(spans[0]!.nameEnd, pieces.slice(0, 6).join("").length);
  });

  test("the sim writes calls as the template renders them back (arguments with Python's json.dumps spacing)", () => {
    const text = writeDeepSeekToolCalls("Looking.", [
      { name: "shell", arguments: { command: "ls é", n: 1 } },
      { name: "f", arguments: "{}" },
    ]);
    assert.equal(text, `Looking.${BEGIN}${call("shell", '{"command": "ls é", "n": 1}')}${call("f", "{}")}${END}`);
    assert.equal(writeDeepSeekToolCalls("Only text.", []), "Only text.");
  });
});
