// Golden tests of gpt-oss (harmony): prompts as vLLM renders a chat request through openai_harmony (the expected text
// of harmony's own test_render_functions_with_parameters, and vLLM's chat-to-harmony rules), and outputs written the
// way harmony's StreamableParser and vLLM's `openai` tool parser read them, with what vLLM answers for each.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { chatFormatOf, divergesInSystemPrompt } from "../trajectory/chat-format.ts";
import type { ChatMessage } from "./chat-template.ts";
import { familyOfTemplate, FAMILIES } from "./families.ts";
import { parseHarmonyHeader } from "./harmony-parse.ts";
import { renderHarmony } from "./harmony-render.ts";
import { gptossFiles, GPTOSS_VOCAB_SIZE } from "./gptoss.ts";
import { familyOfModelDir, gptossChatFormat, loadModelChatFormat, vocabSizeOfModelDir } from "./model-format.ts";
import { answerDeltas, parseAnswer, toolSyntax, type TokenDelta } from "./output-parser.ts";

const format = gptossChatFormat();
const SYNTAX = toolSyntax("openai");
const ids = (text: string) => format.encode(text);
const parse = (text: string, toolParsing = true) => parseAnswer(format, ids(text), "", toolParsing, SYNTAX);

const WEATHER_PARAMS = {
  type: "object",
  properties: {
    location: { type: "string", description: "The city and state, e.g. San Francisco, CA" },
    format: { type: "string", enum: ["celsius", "fahrenheit"], default: "celsius" },
  },
  required: ["location"],
};
const fn = (name: string, description: string, parameters?: unknown) => ({
  type: "function",
  function: parameters === undefined ? { name, description } : { name, description, parameters },
});

describe("harmony rendering (vLLM's chat route for gpt-oss)", () => {
  test("system, developer with instructions and tools, user: harmony's test_render_functions_with_parameters", () => {
    const tools = [
      fn("get_location", "Gets the location of the user."),
      fn("get_current_weather", "Gets the current weather in the provided location.", WEATHER_PARAMS),
      fn("get_multiple_weathers", "Gets the current weather in the provided list of locations.", {
        type: "object",
        properties: {
          locations: {
            type: "array",
            items: { type: "string" },
            description: 'List of city and state, e.g. ["San Francisco, CA", "New York, NY"]',
          },
          format: { type: "string", enum: ["celsius", "fahrenheit"], default: "celsius" },
        },
        required: ["locations"],
      }),
      fn("kitchensink", "A function with various complex schemas.", {
        description: "params object",
        type: "object",
        properties: {
          string: { type: "string", title: "STRING", description: "A string", examples: ["hello", "world"] },
          string_nullable: { type: "string", nullable: true, description: "A nullable string", default: "the default" },
          string_enum: { type: "string", enum: ["a", "b", "c"] },
          oneof_string_or_number: {
            oneOf: [
              { type: "string", default: "default_string_in_oneof" },
              { type: "number", description: "numbers can happen too" },
            ],
            description: "a oneof",
            default: 20,
          },
        },
      }),
    ];
    const messages: ChatMessage[] = [
      { role: "system", content: "Always respond in riddles" },
      { role: "user", content: "What is the weather like in SF?" },
    ];
    const expected = `<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2025-06-28

Reasoning: high

# Valid channels: analysis, commentary, final. Channel must be included for every message.
Calls to these tools must go to the commentary channel: 'functions'.<|end|><|start|>developer<|message|># Instructions

Always respond in riddles

# Tools

## functions

namespace functions {

// Gets the location of the user.
type get_location = () => any;

// Gets the current weather in the provided location.
type get_current_weather = (_: {
// The city and state, e.g. San Francisco, CA
location: string,
format?: "celsius" | "fahrenheit", // default: celsius
}) => any;

// Gets the current weather in the provided list of locations.
type get_multiple_weathers = (_: {
// List of city and state, e.g. ["San Francisco, CA", "New York, NY"]
locations: string[],
format?: "celsius" | "fahrenheit", // default: celsius
}) => any;

// A function with various complex schemas.
type kitchensink = (_: // params object
{
// STRING
//
// A string
// Examples:
// - "hello"
// - "world"
string?: string,
// A nullable string
string_nullable?: string | null, // default: "the default"
string_enum?: "a" | "b" | "c",
// a oneof
// default: 20
oneof_string_or_number?:
 | string // default: "default_string_in_oneof"
 | number // numbers can happen too
,
}) => any;

} // namespace functions<|end|><|start|>user<|message|>What is the weather like in SF?<|end|><|start|>assistant`;
    assert.equal(renderHarmony(messages, { tools, reasoningEffort: "high", date: "2025-06-28" }), expected);
  });

  test("no tools: no commentary channel, no developer message without a system message", () => {
    const text = renderHarmony([{ role: "user", content: "hi" }], { date: "2025-06-28" });
    assert.equal(
      text,
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n" +
        "Current date: 2025-06-28\n\nReasoning: medium\n\n# Valid channels: analysis, final. Channel must be included " +
        "for every message.<|end|><|start|>user<|message|>hi<|end|><|start|>assistant",
    );
  });

  test("an agent turn: reasoning on analysis, each call to=functions.NAME with json, its result from the tool", () => {
    const messages = [
      { role: "user", content: "List the files." },
      {
        role: "assistant",
        content: "Listing.",
        reasoning: "Need ls.",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "shell", arguments: '{"command":"ls"}' } },
          { id: "c2", type: "function", function: { name: "read", arguments: '{"path":"a"}' } },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "a.txt" },
      {
        role: "tool",
        tool_call_id: "c2",
        content: [
          { type: "text", text: "x" },
          { type: "text", text: "y" },
        ],
      },
    ] as unknown as ChatMessage[];
    const text = renderHarmony(messages, { tools: [fn("shell", "Run.", WEATHER_PARAMS)], date: "2025-06-28" });
    const after = text.slice(text.indexOf("<|start|>user"));
    assert.equal(
      after,
      "<|start|>user<|message|>List the files.<|end|>" +
        "<|start|>assistant<|channel|>commentary<|message|>Listing.<|end|>" +
        "<|start|>assistant<|channel|>analysis<|message|>Need ls.<|end|>" +
        '<|start|>assistant to=functions.shell<|channel|>commentary json<|message|>{"command":"ls"}<|call|>' +
        '<|start|>assistant to=functions.read<|channel|>commentary json<|message|>{"path":"a"}<|call|>' +
        "<|start|>functions.shell to=assistant<|channel|>commentary<|message|>a.txt<|end|>" +
        "<|start|>functions.read to=assistant<|channel|>commentary<|message|>xy<|end|><|start|>assistant",
    );
  });

  test("analysis before the last final answer is dropped; after it, kept", () => {
    const messages = [
      { role: "user", content: "q1" },
      { role: "assistant", content: "a1", reasoning_content: "r1" },
      { role: "user", content: "q2" },
      {
        role: "assistant",
        reasoning_content: "r2",
        tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "c", content: "ok" },
    ] as unknown as ChatMessage[];
    const text = renderHarmony(messages, { tools: [fn("f", "")], date: "2025-06-28" });
    assert.ok(!text.includes("r1"));
    assert.ok(text.includes("<|start|>assistant<|channel|>final<|message|>a1<|end|>"));
    assert.ok(text.includes("<|start|>assistant<|channel|>analysis<|message|>r2<|end|>"));
  });

  test("reasoning_effort 'none' is refused, as vLLM refuses it for harmony", () => {
    assert.throws(() => renderHarmony([{ role: "user", content: "x" }], { reasoningEffort: "none" }), /none/);
  });

  test("the docs' example tokenizes to the ids of harmony's StreamableParser example (o200k_harmony)", () => {
    const text =
      '<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.<|end|>' +
      "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>";
    assert.deepEqual(
      ids(text),
      [
        200005, 35644, 200008, 1844, 31064, 25, 392, 4827, 382, 220, 17, 659, 220, 17, 16842, 12295, 81645, 13, 51441,
        6052, 13, 200007, 200006, 173781, 200005, 17196, 200008, 17, 659, 220, 17, 314, 220, 19, 13, 200002,
      ],
    );
  });
});

describe("harmony output parsing (StreamableParser + vLLM's openai tool parser)", () => {
  test("analysis then final: reasoning and content", () => {
    assert.deepEqual(
      parse("<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>4.<|return|>"),
      { reasoning: "Simple.", content: "4.", toolCalls: [] },
    );
  });

  test("analysis then a call (recipient in the channel section, <|constrain|>json): arguments json.dumps'ed", () => {
    const out = parse(
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary " +
        'to=functions.get_weather <|constrain|>json<|message|>{"location":"Tokyo","n":[1,2]}<|call|>',
    );
    assert.deepEqual(out, {
      reasoning: "Need weather.",
      content: null,
      toolCalls: [{ name: "get_weather", arguments: '{"location": "Tokyo", "n": [1, 2]}' }],
    });
  });

  test("consecutive calls are each a call, in order; the recipient may sit in the role section", () => {
    const out = parse(
      '<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|><|start|>assistant to=functions.b<|channel|>commentary json<|message|>{"x": "é"}<|call|>',
    );
    // json.dumps' default ensure_ascii=True escapes non-ASCII.
    assert.deepEqual(out.toolCalls, [
      { name: "a", arguments: "{}" },
      { name: "b", arguments: '{"x": "\\u00e9"}' },
    ]);
  });

  test("text before a call (a commentary preamble): not content with tool parsing, content without it", () => {
    const text =
      "<|channel|>commentary<|message|>Let me check.<|end|><|start|>assistant<|channel|>commentary to=functions.f json<|message|>{}<|call|>";
    assert.deepEqual(parse(text), { reasoning: null, content: null, toolCalls: [{ name: "f", arguments: "{}" }] });
    assert.deepEqual(parse(text, false), { reasoning: null, content: "Let me check.", toolCalls: [] });
  });

  test("malformed: arguments that are not JSON come back as written; a non-json content type is not parsed", () => {
    assert.deepEqual(parse("<|channel|>commentary to=functions.f json<|message|>{oops<|call|>").toolCalls, [
      { name: "f", arguments: "{oops" },
    ]);
    assert.deepEqual(parse('<|channel|>commentary to=functions.f code<|message|>{"a":1}<|call|>').toolCalls, [
      { name: "f", arguments: '{"a":1}' },
    ]);
  });

  test("malformed: text without a header reads as no message (content None), as the strict parser reads it", () => {
    assert.deepEqual(parse("Hello there.<|return|>"), { reasoning: null, content: null, toolCalls: [] });
    // Text where a message must start ends the parse: what came before stands.
    assert.deepEqual(
      parse("<|channel|>final<|message|>ok<|end|>junk<|start|>assistant<|channel|>final<|message|>x<|return|>"),
      {
        reasoning: null,
        content: "ok",
        toolCalls: [],
      },
    );
  });

  test("cut short (max_tokens): unfinished analysis is reasoning; an unfinished final is content without tool parsing", () => {
    assert.deepEqual(parse("<|channel|>analysis<|message|>Thinking abo", true), {
      reasoning: "Thinking abo",
      content: null,
      toolCalls: [],
    });
    assert.deepEqual(
      parse("<|channel|>analysis<|message|>r<|end|><|start|>assistant<|channel|>final<|message|>Half", false),
      {
        reasoning: "r",
        content: "Half",
        toolCalls: [],
      },
    );
  });

  test("an empty message reads as empty text (the tokenizer is never asked to decode no ids)", () => {
    assert.deepEqual(
      parse("<|channel|>analysis<|message|><|end|><|start|>assistant<|channel|>final<|message|><|return|>", false),
      {
        reasoning: null,
        content: null,
        toolCalls: [],
      },
    );
  });

  test("headers: channel, recipient and content type wherever the model writes them", () => {
    assert.deepEqual(parseHarmonyHeader("assistant to=functions.x<|channel|>commentary json", null), {
      role: "assistant",
      channel: "commentary",
      recipient: "functions.x",
      contentType: "json",
    });
    assert.deepEqual(parseHarmonyHeader("<|channel|>commentary to=functions.x<|constrain|>json", "assistant"), {
      role: "assistant",
      channel: "commentary",
      recipient: "functions.x",
      contentType: "<|constrain|>json",
    });
    assert.throws(() => parseHarmonyHeader("assistant a b c", null), /remaining/);
  });
});

describe("harmony streams (vLLM's stream_harmony)", () => {
  const deltas = (text: string): (TokenDelta | null)[] => {
    const sampled = ids(text);
    return answerDeltas(
      format,
      { ids: sampled, pieces: format.textPieces(sampled), fullText: "", toolCalls: [] },
      true,
    );
  };

  test("reasoning then content, token by token; markup sends nothing but the final channel's opening ''", () => {
    const out = deltas(
      "<|channel|>analysis<|message|>Think hard.<|end|><|start|>assistant<|channel|>final<|message|>Done now.<|return|>",
    );
    const reasoning = out.map((d) => d?.reasoning_content ?? "").join("");
    const content = out.map((d) => d?.content ?? "").join("");
    assert.equal(reasoning, "Think hard.");
    assert.equal(content, "Done now.");
    assert.equal(out[out.length - 1], null);
  });

  test("a call opens (id, name, empty arguments) at its message token; the arguments follow as written", () => {
    const out = deltas(
      '<|channel|>commentary to=functions.shell <|constrain|>json<|message|>{"command": "ls"}<|call|><|start|>assistant<|channel|>commentary to=functions.shell json<|message|>{}<|call|>',
    );
    const calls = out.flatMap((d) => d?.toolCalls ?? []);
    assert.deepEqual(
      calls.filter((c) => c.name !== undefined),
      [
        { index: 0, name: "shell", arguments: "" },
        { index: 1, name: "shell", arguments: "" },
      ],
    );
    const args = (i: number) =>
      calls
        .filter((c) => c.index === i && c.name === undefined)
        .map((c) => c.arguments)
        .join("");
    assert.equal(args(0), '{"command": "ls"}');
    assert.equal(args(1), "{}");
  });
});

describe("gpt-oss family", () => {
  test("a template with harmony's markers is gpt-oss's; the family's turn ids come from o200k_harmony", () => {
    assert.equal(
      familyOfTemplate("{{- '<|start|>assistant<|channel|>final<|message|>' }}<|call|>", "t"),
      FAMILIES.gptoss,
    );
    const rules = chatFormatOf(format);
    assert.equal(rules.turnStart, 200006);
    assert.equal(rules.turnEnd, 200007);
    assert.deepEqual(rules.systemHeader, [200006, 17360]);
    assert.deepEqual([...format.stopIds].sort(), [200002, 200012]);
  });
});

describe("gpt-oss reconstruction: the system prompt is the system and developer messages", () => {
  test("prompts that part inside the developer message (the harness's instructions) part in the system prompt", () => {
    const prompt = (system: string, user: string) =>
      ids(
        renderHarmony(
          [
            { role: "system", content: system },
            { role: "user", content: user },
          ],
          { date: "2025-06-28" },
        ),
      );
    const rules = chatFormatOf(format);
    const at = (a: number[], b: number[]) => a.findIndex((id, i) => id !== b[i]);
    const main = prompt("You are the main agent.", "Do it.");
    const sub = prompt("You are a sub-agent.", "Do it.");
    const later = prompt("You are the main agent.", "Do something else.");
    assert.equal(divergesInSystemPrompt(sub, at(main, sub), rules), true);
    assert.equal(divergesInSystemPrompt(later, at(main, later), rules), false);
  });
});

describe("--model-dir with gpt-oss's files", () => {
  test("config.json's model_type gpt_oss picks harmony (as vLLM does) and its vocab_size bounds the ids", () => {
    const dir = mkdtempSync(join(tmpdir(), "rlgate-gptoss-"));
    try {
      const files = gptossFiles();
      writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(files.tokenizerJSON));
      writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(files.tokenizerConfig));
      writeFileSync(join(dir, "config.json"), JSON.stringify({ model_type: "gpt_oss", vocab_size: GPTOSS_VOCAB_SIZE }));
      // No chat template: vLLM renders gpt-oss with harmony and reads none.
      assert.equal(familyOfModelDir(dir), FAMILIES.gptoss);
      assert.equal(vocabSizeOfModelDir(dir), 201_088);
      const loaded = loadModelChatFormat(dir);
      const messages: ChatMessage[] = [{ role: "user", content: "hi" }];
      assert.deepEqual(loaded.encode(loaded.render(messages)), format.encode(format.render(messages)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
