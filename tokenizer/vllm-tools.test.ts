// Tools as vLLM renders them: its request model dumps each tool as `{type, function: {name, description, parameters}}`
// whatever order the harness wrote, and a missing description as None. Each family's real chat template is rendered
// here with @huggingface/jinja, independently of rlgate's ChatTemplate, given the tools written out as vLLM's
// `model_dump()` gives them; rlgate's rendering of the same request with the harness's tools must equal it.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Template } from "@huggingface/jinja";
import { deepSeekV31Files } from "./deepseek-v31.ts";
import { llama3Files } from "./llama3.ts";
import {
  deepSeekV31ChatFormat,
  gptossChatFormat,
  llama3ChatFormat,
  qwen3ChatFormat,
  qwen3CoderChatFormat,
  type ModelChatFormat,
} from "./model-format.ts";
import { qwen3CoderTemplate } from "./qwen3-coder.ts";
import { qwen3Tokenizer } from "./qwen3.ts";
import { vllmTools } from "./vllm-tools.ts";

const EXEC_PARAMETERS = {
  type: "object",
  properties: { command: { type: "string", description: "the command" } },
  required: ["command"],
};
const READ_PARAMETERS = { type: "object", properties: { path: { type: "string" } }, required: ["path"] };

/** As a harness may send them: keys in another order, and a tool without a description. */
const SENT = [
  { function: { parameters: EXEC_PARAMETERS, description: "Run a shell command", name: "exec" }, type: "function" },
  { type: "function", function: { name: "read", parameters: READ_PARAMETERS } },
];

/** What vLLM's `[tool.model_dump() for tool in request.tools]` hands the template for SENT. */
const DUMPED = [
  { type: "function", function: { name: "exec", description: "Run a shell command", parameters: EXEC_PARAMETERS } },
  { type: "function", function: { name: "read", description: null, parameters: READ_PARAMETERS } },
];

const MESSAGES = [
  { role: "system", content: "You are an agent." },
  { role: "user", content: "list the files" },
];

function bos(config: Record<string, unknown>): string {
  const token = config["bos_token"];
  return typeof token === "string" ? token : ((token as { content?: string } | null)?.content ?? "");
}

function reference(source: string, tools: unknown[], tokens: { bos: string; eos: string }): string {
  return new Template(source).render({
    messages: MESSAGES,
    tools,
    add_generation_prompt: true,
    bos_token: tokens.bos,
    eos_token: tokens.eos,
  });
}

function rendered(format: ModelChatFormat, tools: unknown[]): string {
  return format.render(MESSAGES, { tools, addGenerationPrompt: true });
}

describe("tools rendered as vLLM renders them", () => {
  it("the dump: declared fields first in the model's order, a missing description or parameters as null, extras after", () => {
    assert.deepEqual(JSON.parse(JSON.stringify(vllmTools(SENT))), DUMPED);
    assert.deepEqual(
      vllmTools(SENT).map((t) => Object.keys(t as object)),
      [
        ["type", "function"],
        ["type", "function"],
      ],
    );
    const extra = vllmTools([{ function: { strict: true, name: "x" }, cache: 1, type: "function" }])[0];
    assert.equal(
      JSON.stringify(extra),
      '{"type":"function","function":{"name":"x","description":null,"parameters":null,"strict":true},"cache":1}',
    );
  });

  it("Qwen3 (hermes): each tool's tojson is vLLM's dump", () => {
    const format = qwen3ChatFormat();
    const text = rendered(format, SENT);
    assert.equal(text, reference(qwen3Tokenizer().chatTemplate, DUMPED, { bos: "", eos: "<|im_end|>" }));
    assert.ok(text.includes('{"name": "read", "description": null, "parameters": {'));
    assert.deepEqual(format.encode(text), format.encode(rendered(format, DUMPED)));
  });

  it('Llama 3.x: the tools in the first user message are vLLM\'s dump, `"description": null` included', () => {
    const format = llama3ChatFormat();
    const files = llama3Files();
    const text = rendered(format, SENT);
    assert.equal(text, reference(files.chatTemplate, DUMPED, { bos: bos(files.tokenizerConfig), eos: "<|eot_id|>" }));
    assert.ok(text.includes('"description": null'));
    // The harness's own order would have given other ids from the first tool on.
    const asSent = format.encode(reference(files.chatTemplate, SENT, { bos: bos(files.tokenizerConfig), eos: "" }));
    const ids = format.encode(text);
    const first = ids.findIndex((id, i) => id !== asSent[i]);
    assert.ok(first > 0 && first < ids.length, `ids part at ${first}`);
  });

  it("Qwen3-Coder: `<description>None</description>` for a tool without one (Python's str(None) under `| trim`)", () => {
    const format = qwen3CoderChatFormat();
    const text = rendered(format, SENT);
    // @huggingface/jinja prints None as Python does not: the reference is handed the text Python's `| trim` prints.
    const printed = DUMPED.map((t) => ({
      ...t,
      function: { ...t.function, description: t.function.description ?? "None" },
    }));
    assert.equal(text, reference(qwen3CoderTemplate(), printed, { bos: "", eos: "<|im_end|>" }));
    assert.ok(text.includes("<name>read</name>\n<description>None</description>\n<parameters>"));
    assert.ok(text.indexOf("<name>exec</name>\n<description>Run a shell command</description>") > 0);
  });

  it("DeepSeek V3.1: a reordered tool renders as vLLM's dump; one without a description is refused, as vLLM's template refuses it", () => {
    const format = deepSeekV31ChatFormat();
    const files = deepSeekV31Files();
    const tokens = { bos: bos(files.tokenizerConfig), eos: "<｜end▁of▁sentence｜>" };
    assert.equal(rendered(format, [SENT[0]]), reference(files.chatTemplate, [DUMPED[0]], tokens));
    // `'\nDescription: ' + None` raises in Python: vLLM answers 400, tokens mode falls back to the upstream's answer.
    assert.throws(() => rendered(format, SENT));
  });

  it("gpt-oss (harmony): fields are read by name, so order does not matter; no description, no comment line", () => {
    const format = gptossChatFormat();
    const text = rendered(format, SENT);
    assert.equal(text, rendered(format, DUMPED));
    assert.ok(text.includes("\ntype read = (_: {"));
    assert.ok(!text.includes("// None") && !text.includes("// null"));
  });
});
