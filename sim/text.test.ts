import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { renderChat } from "../tokenizer/chat-template.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { formatTurn, generate } from "./generate.ts";
import { encodeCached } from "./prompt.ts";
import { pyJson } from "../tokenizer/py-json.ts";
import { textPieces, tokenBytes, TOKEN } from "../tokenizer/token-text.ts";

const tok = qwen3Tokenizer();

describe("token text", () => {
  test("pieces join to the decoded text and hold back partial UTF-8 characters", () => {
    const text = "héllo 🎉 世界 — <think>x</think> \u0000tab\t";
    const ids = tok.encode(text);
    const pieces = textPieces(ids);
    assert.equal(pieces.join(""), tok.decode(ids));
    assert.ok(pieces.every((p) => !p.includes("\ufffd")));
    assert.ok(
      pieces.some((p, i) => p === "" && tokenBytes(ids[i]!).length > 0),
      "an emoji spans tokens",
    );
  });

  test("special tokens release no text; <think> and <tool_call> do", () => {
    assert.equal(tokenBytes(TOKEN.imEnd).length, 0);
    assert.equal(tokenBytes(TOKEN.endOfText).length, 0);
    assert.equal(Buffer.from(tokenBytes(TOKEN.thinkOpen)).toString(), "<think>");
    assert.equal(Buffer.from(tokenBytes(TOKEN.toolCallOpen)).toString(), "<tool_call>");
  });
});

describe("prompt tokenization cache", () => {
  test("block-by-block encoding equals encoding the whole rendered prompt", () => {
    const messages = [
      { role: "system", content: "You are a helper.\n\n" },
      { role: "user", content: "  leading spaces and 中文 " },
      {
        role: "assistant",
        content: "\n\nok",
        tool_calls: [{ id: "1", type: "function", function: { name: "bash", arguments: '{"command": "ls"}' } }],
      },
      { role: "tool", content: "a\nb\n" },
      { role: "user", content: "<|im_start|> inside text" },
    ];
    const text = renderChat(messages, { tools: [{ type: "function", function: { name: "bash", parameters: {} } }] });
    assert.deepEqual(encodeCached(text), tok.encode(text));
    assert.deepEqual(encodeCached(text), tok.encode(text), "a second, cached pass gives the same ids");
    assert.deepEqual(encodeCached("no chat markup at all"), tok.encode("no chat markup at all"));
  });
});

describe("tool-call serialization", () => {
  test("pyJson writes what the chat template's tojson writes", () => {
    const args = {
      command: "ls -la",
      n: 3,
      f: 1.5,
      ok: true,
      none: null,
      list: [1, "two", { é: "ü" }],
      nested: { q: 'say "hi"\n' },
    };
    const rendered = renderChat([
      { role: "user", content: "x" },
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: "1", type: "function", function: { name: "f", arguments: args } }],
      },
    ]);
    assert.ok(rendered.includes(`"arguments": ${pyJson(args)}}`), rendered);
    assert.equal(pyJson({ a: [1, { b: "c" }] }), '{"a": [1, {"b": "c"}]}');
    assert.equal(pyJson(1e-7), "1e-07");
  });

  test("formatTurn places spans on the name and arguments", () => {
    const { text, toolCalls } = formatTurn({
      reasoning: "r",
      content: "c",
      toolCalls: [{ name: "bash", arguments: { command: "ls" } }],
    });
    assert.equal(
      text,
      '<think>\nr\n</think>\n\nc\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>',
    );
    const [span] = toolCalls;
    assert.equal(text.slice(span!.start, span!.start + 11), "<tool_call>");
    assert.equal(text.slice(span!.nameEnd - 6, span!.nameEnd), '"bash"');
    assert.equal(text.slice(span!.argsStart, span!.argsEnd), '{"command": "ls"}');
  });

  test("generate: EOS appended, max_tokens cuts before it, stop_token_ids stop at the first hit", () => {
    const turn = { reasoning: null, content: "one two three", toolCalls: [] };
    const full = generate(turn, { maxTokens: 100, stopToken: TOKEN.imEnd });
    assert.deepEqual(full.ids, [...tok.encode("one two three"), TOKEN.imEnd]);
    assert.equal(full.text, "one two three");
    const cut = generate(turn, { maxTokens: full.ids.length - 1, stopToken: TOKEN.imEnd });
    assert.equal(cut.finishReason, "length");
    assert.deepEqual(cut.ids, full.ids.slice(0, -1));
    const two = tok.encode(" two")[0]!;
    const stopped = generate(turn, { maxTokens: 100, stopToken: TOKEN.imEnd, stopTokenIds: [two] });
    assert.equal(stopped.ids.at(-1), two);
    assert.equal(stopped.stopReason, two);
  });
});
