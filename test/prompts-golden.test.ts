// Harness-visible answers are the same in both prompt modes for the same sampled ids: one sim (scripted, so both
// modes sample the same turns), one gateway per mode, the same conversations through the official SDKs — chat
// completions (whole and streamed), Anthropic Messages and OpenAI Responses (whole and streamed: every event). Only
// what differs between any two runs (ids, timestamps, prompt token counts, which grow differently) is set aside.
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { after, before, describe, test } from "node:test";
import { startGateway, type Gateway } from "../gateway/index.ts";
import type { ScriptTurn } from "../sim/index.ts";
import { createRollout, rolloutCalls, startStack, tempDir, TOOLS, type Stack } from "./helpers.ts";
import { rmSync } from "node:fs";

type Json = Record<string, any>;

const SCRIPT: ScriptTurn[] = [
  {
    reasoning: "Look at the directory.",
    tool_calls: [{ name: "run_shell_command", arguments: { command: "ls -la" } }],
  },
  {
    reasoning: "Two files, read both. é 😀",
    content: "Reading both now.",
    tool_calls: [
      { name: "run_shell_command", arguments: { command: "cat a.txt" } },
      { name: "run_shell_command", arguments: '{"command":"cat b.txt"}' },
    ],
  },
  { content: "Both files are short: ✓." },
];

const VOLATILE_IDS = new Set(["id", "tool_call_id", "call_id", "item_id", "tool_use_id", "previous_response_id"]);
const VOLATILE = new Set([
  "created",
  "created_at",
  "completed_at",
  "prompt_tokens",
  "total_tokens",
  "input_tokens",
  "system_fingerprint",
]);

/** A JSON value with ids replaced by their order of appearance and per-run fields removed. */
function comparable(value: unknown, ids = new Map<string, string>()): unknown {
  if (Array.isArray(value)) return value.map((item) => comparable(item, ids));
  if (value === null || typeof value !== "object") return value;
  const out: Json = {};
  for (const [key, item] of Object.entries(value as Json)) {
    if (VOLATILE.has(key)) continue;
    if (VOLATILE_IDS.has(key) && typeof item === "string") {
      if (!ids.has(item)) ids.set(item, `id${ids.size}`);
      out[key] = ids.get(item);
      continue;
    }
    out[key] = comparable(item, ids);
  }
  return out;
}

interface Modes {
  messages: Gateway;
  tokens: Gateway;
}

type Conversation = (base: { openai: string; anthropic: string }) => Promise<unknown[]>;

async function both(stack: Stack, modes: Modes, conversation: Conversation): Promise<void> {
  const seen: Record<string, unknown[]> = {};
  for (const mode of ["messages", "tokens"] as const) {
    const rollout = await createRollout(modes[mode].url);
    seen[mode] = await conversation(rollout.base_urls);
    const calls = await rolloutCalls(modes[mode].url, rollout.id);
    for (const call of calls) {
      assert.equal(call.status, "ok", call.error ?? "");
      assert.equal(call.prompt?.mode ?? "messages", mode);
    }
  }
  assert.ok(seen["tokens"]!.length > 0);
  assert.deepEqual(comparable(seen["tokens"]), comparable(seen["messages"]));
}

const chatTools = TOOLS as unknown as OpenAI.Chat.ChatCompletionTool[];

/** Three chat turns: tool call, text before two parallel calls, final text. */
function chatConversation(stream: boolean, thinking: boolean): Conversation {
  return async (base) => {
    const client = new OpenAI({ baseURL: base.openai, apiKey: "sk-test", maxRetries: 0 });
    const messages: Json[] = [
      { role: "system", content: "You are an agent." },
      { role: "user", content: "Read the files." },
    ];
    const seen: unknown[] = [];
    for (let turn = 0; turn < SCRIPT.length; turn++) {
      const body: Json = { model: "Qwen/Qwen3-8B", messages, tools: chatTools };
      if (!thinking) body["chat_template_kwargs"] = { enable_thinking: false };
      let message: Json;
      if (stream) {
        const chunks: Json[] = [];
        for await (const chunk of (await client.chat.completions.create({
          ...body,
          stream: true,
        } as never)) as unknown as AsyncIterable<Json>)
          chunks.push(chunk);
        seen.push(chunks);
        message = { role: "assistant", content: "", tool_calls: [] as Json[] };
        for (const chunk of chunks) {
          const delta = chunk["choices"][0]?.delta ?? {};
          if (delta.content) message["content"] += delta.content;
          for (const call of delta.tool_calls ?? []) {
            message["tool_calls"][call.index] ??= {
              id: call.id,
              type: "function",
              function: { name: call.function.name, arguments: "" },
            };
            message["tool_calls"][call.index].function.arguments += call.function.arguments ?? "";
          }
        }
      } else {
        const completion = (await client.chat.completions.create(body as never)) as unknown as Json;
        seen.push(completion);
        message = completion["choices"][0].message;
      }
      messages.push({
        role: "assistant",
        content: message["content"],
        tool_calls: message["tool_calls"]?.length ? message["tool_calls"] : undefined,
      });
      for (const call of message["tool_calls"] ?? [])
        messages.push({ role: "tool", tool_call_id: call.id, content: `ran ${call.function.arguments}` });
    }
    return seen;
  };
}

function messagesConversation(stream: boolean): Conversation {
  return async (base) => {
    const client = new Anthropic({ baseURL: base.anthropic, apiKey: "sk-ant-test", maxRetries: 0 });
    const tools = [
      {
        name: "run_shell_command",
        description: "Run a shell command",
        input_schema: { type: "object" as const, properties: { command: { type: "string" } } },
      },
    ];
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "Read the files." }];
    const seen: unknown[] = [];
    for (let turn = 0; turn < SCRIPT.length; turn++) {
      const request = { model: "Qwen/Qwen3-8B", max_tokens: 2048, system: "You are an agent.", tools, messages };
      let content: Anthropic.ContentBlock[];
      if (stream) {
        const events: unknown[] = [];
        const s = client.messages.stream(request);
        for await (const event of s) events.push(event);
        const final = await s.finalMessage();
        seen.push(events, final);
        content = final.content;
      } else {
        const message = await client.messages.create(request);
        seen.push(message);
        content = message.content;
      }
      messages.push({ role: "assistant", content });
      const results = content
        .filter((b) => b.type === "tool_use")
        .map((b) => ({ type: "tool_result" as const, tool_use_id: (b as Anthropic.ToolUseBlock).id, content: "ran" }));
      if (results.length) messages.push({ role: "user", content: results });
    }
    return seen;
  };
}

function responsesConversation(stream: boolean): Conversation {
  return async (base) => {
    const client = new OpenAI({ baseURL: base.openai, apiKey: "sk-test", maxRetries: 0 });
    const tools: OpenAI.Responses.FunctionTool[] = [
      {
        type: "function",
        name: "run_shell_command",
        description: "Run a shell command",
        parameters: { type: "object", properties: { command: { type: "string" } } },
        strict: false,
      },
    ];
    const input: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: "Read the files." }];
    const seen: unknown[] = [];
    for (let turn = 0; turn < SCRIPT.length; turn++) {
      const request = { model: "Qwen/Qwen3-8B", instructions: "You are an agent.", input, tools, store: false };
      let response: OpenAI.Responses.Response;
      if (stream) {
        const events: unknown[] = [];
        for await (const event of await client.responses.create({ ...request, stream: true })) events.push(event);
        response = (events.at(-1) as Json)["response"];
        seen.push(events);
      } else {
        response = await client.responses.create(request);
        seen.push(response);
      }
      for (const item of response.output) {
        if (item.type === "reasoning") continue;
        input.push(item as OpenAI.Responses.ResponseInputItem);
        if (item.type === "function_call")
          input.push({ type: "function_call_output", call_id: item.call_id, output: "ran" });
      }
    }
    return seen;
  };
}

describe("harness-visible answers are the same in both prompt modes", () => {
  let stack: Stack;
  let modes: Modes;
  let tokensDir: string;

  before(async () => {
    stack = await startStack({ sim: { script: SCRIPT, seed: 3 } });
    tokensDir = tempDir("tokens");
    modes = {
      messages: stack.gateway,
      tokens: await startGateway({ upstream: stack.sim.url, port: 0, dataDir: tokensDir, prompts: "tokens" }),
    };
  });
  after(async () => {
    await modes.tokens.close();
    await stack.close();
    rmSync(tokensDir, { recursive: true, force: true });
  });

  test("chat completions, whole: content, reasoning, tool calls, finish reasons", () =>
    both(stack, modes, chatConversation(false, true)));
  test("chat completions, streamed: every chunk", () => both(stack, modes, chatConversation(true, true)));
  test("chat completions, streamed with thinking off", () => both(stack, modes, chatConversation(true, false)));
  test("Anthropic Messages (official SDK), whole", () => both(stack, modes, messagesConversation(false)));
  test("Anthropic Messages (official SDK), streamed: every event and the final message", () =>
    both(stack, modes, messagesConversation(true)));
  test("OpenAI Responses (official SDK), whole", () => both(stack, modes, responsesConversation(false)));
  test("OpenAI Responses (official SDK), streamed: every event", () => both(stack, modes, responsesConversation(true)));
});
