// Golden tests of the llama3_json parser: outputs written the way vLLM's Llama3JsonToolParser reads them
// (vllm/entrypoints/openai/tool_parsers/llama_tool_parser.py), with what it returns for each.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chatFormatOf } from "../trajectory/chat-format.ts";
import { familyOfTemplate, FAMILIES } from "./families.ts";
import { extractLlamaToolCalls, llamaToolCallSpans, writeLlamaToolCalls } from "./llama3-json.ts";
import { llama3ChatFormat } from "./model-format.ts";
import { parseChatOutput, streamDeltas, toolSyntax } from "./output-parser.ts";

const SYNTAX = toolSyntax("llama3_json");
const parse = (text: string) => parseChatOutput(text, true, SYNTAX, false);

describe("llama3_json: whole answers (extract_tool_calls)", () => {
  test("one call with parameters: arguments are json.dumps of them, non-ASCII kept (ensure_ascii=False)", () => {
    assert.deepEqual(parse('{"name": "shell", "parameters": {"command": "cat é.txt", "n": 2}}'), {
      reasoning: null,
      content: null,
      toolCalls: [{ name: "shell", arguments: '{"command": "cat é.txt", "n": 2}' }],
    });
  });

  test('"arguments" is read as well as "parameters"; compact JSON comes back with Python\'s separators', () => {
    assert.deepEqual(parse('{"name":"read","arguments":{"path":"a.txt","lines":[1,2]}}').toolCalls, [
      { name: "read", arguments: '{"path": "a.txt", "lines": [1, 2]}' },
    ]);
  });

  test("parallel calls joined by ';' are each a call, in order", () => {
    const text =
      '{"name": "shell", "parameters": {"command": "ls"}}; {"name": "read", "parameters": {"path": "b"}}  ;{"name": "x", "parameters": {}}';
    assert.deepEqual(parse(text), {
      reasoning: null,
      content: null,
      toolCalls: [
        { name: "shell", arguments: '{"command": "ls"}' },
        { name: "read", arguments: '{"path": "b"}' },
        { name: "x", arguments: "{}" },
      ],
    });
  });

  test("text before (and after) a call: the call is found, the text is not returned (content is None)", () => {
    const text = 'Let me look first.\n\n{"name": "shell", "parameters": {"command": "ls"}} and then more.';
    assert.deepEqual(parse(text), {
      reasoning: null,
      content: null,
      toolCalls: [{ name: "shell", arguments: '{"command": "ls"}' }],
    });
  });

  test("only the first run of joined objects is read: a later call after text is not", () => {
    const text = '{"name": "a", "parameters": {}} then {"name": "b", "parameters": {}}';
    assert.deepEqual(parse(text).toolCalls, [{ name: "a", arguments: "{}" }]);
  });

  test("text without a call, or with no '{' at all, is content", () => {
    assert.deepEqual(parse("The answer is 4."), { reasoning: null, content: "The answer is 4.", toolCalls: [] });
    assert.deepEqual(parse("Use {braces} wisely."), {
      reasoning: null,
      content: "Use {braces} wisely.",
      toolCalls: [],
    });
  });

  test("what raises in vLLM reports the whole text as content: ';' inside a string, no name, nesting > 2", () => {
    for (const text of [
      '{"name": "shell", "parameters": {"command": "cd /tmp; ls"}}',
      '{"tool": "shell", "parameters": {"command": "ls"}}',
      '{"name": "shell"}',
      '{"name": "edit", "parameters": {"patch": {"file": "a", "hunks": {"n": 1}}}}',
      '{"name": 3, "parameters": {}}',
    ]) {
      assert.deepEqual(parse(text), { reasoning: null, content: text, toolCalls: [] }, text);
    }
  });

  test("Llama has no reasoning parser: a think block is content", () => {
    assert.deepEqual(parse("<think>hm</think>Hi"), { reasoning: null, content: "<think>hm</think>Hi", toolCalls: [] });
  });

  test("tool parsing off (no tools, tool_choice none): JSON is content", () => {
    const text = '{"name": "shell", "parameters": {"command": "ls"}}';
    assert.deepEqual(parseChatOutput(text, false, SYNTAX, false).content, text);
    assert.equal(extractLlamaToolCalls(text).content, null);
  });
});

describe("llama3_json: streams (extract_tool_calls_streaming)", () => {
  const format = llama3ChatFormat();
  function stream(text: string) {
    const ids = format.encode(text);
    const pieces = format.textPieces(ids);
    const deltas = streamDeltas({ ids, pieces, fullText: text, toolCalls: llamaToolCallSpans(text) }, true, null);
    const content = deltas.map((d) => d?.content ?? "").join("");
    const calls: Array<{ name: string; arguments: string }> = [];
    for (const d of deltas.flatMap((x) => x?.toolCalls ?? [])) {
      const entry = (calls[d.index] ??= { name: "", arguments: "" });
      if (d.name) entry.name = d.name;
      entry.arguments += d.arguments ?? "";
    }
    return { content, calls, deltas };
  }

  test("an answer that starts with '{': calls streamed, names whole, arguments adding up to the whole answer's", () => {
    const text = '{"name": "shell", "parameters": {"command": "ls é"}}; {"name": "read", "parameters": {"path": "a"}}';
    const { content, calls, deltas } = stream(text);
    assert.equal(content, "");
    assert.deepEqual(calls, parse(text).toolCalls);
    // The name goes out once, on the token that closes its string, not before.
    const first = deltas.findIndex((d) => d?.toolCalls?.some((c) => c.name === "shell"));
    const ids = format.encode(text);
    assert.ok(format.decode(ids.slice(0, first + 1)).endsWith('"shell",'), format.decode(ids.slice(0, first + 1)));
  });

  test("an answer that does not start with '{' streams as content, a call after text included (as vLLM does)", () => {
    const text = 'Sure. {"name": "shell", "parameters": {"command": "ls"}}';
    assert.deepEqual(llamaToolCallSpans(text), []);
    assert.equal(stream(text).content, text);
  });

  test("empty arguments are never streamed (vLLM sends arguments only when they are truthy)", () => {
    assert.deepEqual(llamaToolCallSpans('{"name": "now", "parameters": {}}')[0]!.arguments, "");
  });
});

describe("Llama 3.x format", () => {
  const format = llama3ChatFormat();

  test("its template is recognised, its markup ids are the tokenizer's", () => {
    assert.equal(familyOfTemplate(format.render([{ role: "user", content: "x" }]), "t"), FAMILIES.llama3);
    assert.deepEqual(chatFormatOf(format), {
      turnStart: 128006,
      turnEnd: 128009,
      systemHeader: [128000, 128006, 9125],
      thinkEnd: -1,
      toolCallStart: 128010,
      emptyThink: [],
      turns: { starts: [128006], ends: [128009], roleIds: 1, modelTurnAfter: [] },
    });
    assert.deepEqual(format.stopIds, [128001, 128008, 128009]);
    assert.equal(format.think, null);
  });

  test("a call as the sim writes it is what the template renders back for the parsed call", () => {
    const written = writeLlamaToolCalls([{ name: "shell", arguments: { command: "ls é", n: 1.5, all: true } }]);
    const parsed = parse(written).toolCalls[0]!;
    const rendered = format.render(
      [
        { role: "user", content: "go" },
        { role: "assistant", content: "", tool_calls: [{ function: parsed }] },
      ],
      { addGenerationPrompt: false },
    );
    assert.ok(rendered.endsWith(`<|start_header_id|>assistant<|end_header_id|>\n\n${written}<|eot_id|>`), rendered);
  });

  test("tool results render as tojson of the content (a string is iterable to jinja), tools in the first user turn", () => {
    const text = format.render(
      [
        { role: "user", content: "go" },
        { role: "assistant", content: "", tool_calls: [{ function: { name: "shell", arguments: "{}" } }] },
        { role: "tool", content: 'say "hi"' },
      ],
      { tools: [{ type: "function", function: { name: "shell", parameters: {} } }] },
    );
    assert.match(text, /<\|start_header_id\|>ipython<\|end_header_id\|>\n\n"say \\"hi\\""<\|eot_id\|>/);
    assert.match(text, /<\|start_header_id\|>user<\|end_header_id\|>\n\nGiven the following functions/);
    assert.ok(text.endsWith("<|start_header_id|>assistant<|end_header_id|>\n\n"));
  });

  test("the template renders one tool call per turn and refuses more, as Llama's own does", () => {
    const call = { function: { name: "a", arguments: "{}" } };
    assert.throws(
      () =>
        format.render([
          { role: "user", content: "go" },
          { role: "assistant", content: "", tool_calls: [call, call] },
        ]),
      /only supports single tool-calls at once/,
    );
  });
});
