// The Anthropic Messages surface, driven by the official SDK (@anthropic-ai/sdk): what the SDK parses equals what the
// upstream generated, the captured ids equal the upstream's, streaming follows Anthropic's event order, and errors
// come in Anthropic's shape.
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { createRollout, postJson, rolloutCalls, startStack, type CreatedRollout, type Stack } from "./helpers.ts";
import {
  SHELL_SCHEMA,
  assertCaptureEquals,
  assertFirstByteEarly,
  assertLoopCaptured,
  eventNames,
  proofScript,
  runShell,
  streamTiming,
  upstreamAnswer,
  useAgentLoop,
  withoutKeys,
  type Json,
} from "./surfaces-helpers.ts";

const MODEL = "claude-sonnet-5-5";
const SYSTEM = [{ type: "text" as const, text: "You are a careful coding agent." }];
const TOOLS = [{ name: "run_shell_command", description: "Run a shell command", input_schema: SHELL_SCHEMA }];
const ASK = [{ role: "user" as const, content: "List the files in the current directory." }];

function client(rollout: CreatedRollout, headers: Record<string, string> = {}): Anthropic {
  return new Anthropic({
    baseURL: rollout.base_urls.anthropic,
    apiKey: "sk-ant-test",
    maxRetries: 0,
    defaultHeaders: headers,
  });
}

/** Content blocks without what differs between two runs of the same request (tool ids). */
const comparable = (content: unknown): unknown => withoutKeys(content, ["id"]);

describe("Anthropic Messages surface (official SDK)", () => {
  let stack: Stack;
  let first: { rollout: CreatedRollout; message: Anthropic.Message };

  before(async () => {
    stack = await startStack({ sim: { seed: 5 }, gateway: { modelMap: "claude-*=Qwen/Qwen3-8B" } });
  });
  after(async () => {
    await stack.close();
  });

  test("non-streamed tool use: the SDK's message is the upstream's answer and the capture is the upstream's ids", async () => {
    const rollout = await createRollout(stack.gateway.url, { harness: "anthropic-sdk" });
    const message = await client(rollout).messages.create({
      model: MODEL,
      max_tokens: 1024,
      system: SYSTEM,
      tools: TOOLS,
      messages: ASK,
    });
    first = { rollout, message };

    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.ok(call);
    assert.equal(call.api, "messages");
    assert.equal(call.model, MODEL);
    const answer = await upstreamAnswer(stack, call);
    assertCaptureEquals(call, answer);
    const generated = answer.choices[0].message;

    // What the SDK parsed is what the model generated.
    assert.equal(message.role, "assistant");
    assert.equal(message.model, MODEL, "the harness's own model name is echoed");
    assert.equal(message.stop_reason, "tool_use");
    const [thinking, toolUse] = message.content;
    assert.equal(thinking?.type, "thinking");
    // vLLM's reasoning starts with the "\n" after <think>; the harness gets it without (the record keeps the ids).
    assert.match(generated.reasoning, /^\n/);
    assert.equal(thinking.thinking, generated.reasoning.replace(/^\n+/, ""));
    assert.equal(toolUse?.type, "tool_use");
    assert.equal(toolUse.name, generated.tool_calls[0].function.name);
    assert.deepEqual(toolUse.input, JSON.parse(generated.tool_calls[0].function.arguments));
    assert.equal(message.content.length, 2, "the whitespace-only content before the tool call is no block");
    assert.equal(message.usage.input_tokens, answer.usage.prompt_tokens);
    assert.equal(message.usage.output_tokens, answer.usage.completion_tokens);
    assert.match(qwen3Tokenizer().decode(call.choices[0]!.tokenIds), /<tool_call>\n\{"name": "run_shell_command"/);

    // The record holds the request as received, as forwarded, the delivered response and the upstream's.
    const received = call.requestReceived as Json;
    assert.deepEqual(received.system, SYSTEM);
    const forwarded = call.requestForwarded as Json;
    assert.equal(forwarded.model, "Qwen/Qwen3-8B", "model map applied");
    assert.deepEqual(forwarded.messages[0], { role: "system", content: SYSTEM[0]!.text });
    assert.equal(forwarded.tools[0].function.name, "run_shell_command");
    assert.equal(forwarded.return_token_ids, true);
    assert.equal(forwarded.logprobs, true);
    assert.deepEqual((call.response as Json).content, JSON.parse(JSON.stringify(message.content)));
    const upstream = call.upstreamResponse as Json;
    assert.equal(upstream.choices[0].message.tool_calls[0].id, toolUse.id);
    assert.equal(upstream.choices[0].token_ids, null, "ids live in the capture, not twice in the record");
  });

  test("streamed: Anthropic's event order, and the SDK's final message equals the non-streamed one", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const stream = client(rollout).messages.stream({
      model: MODEL,
      max_tokens: 1024,
      system: SYSTEM,
      tools: TOOLS,
      messages: ASK,
    });
    const events: Anthropic.MessageStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const final = await stream.finalMessage();

    const types = events.map((e) => e.type);
    assert.equal(types[0], "message_start");
    assert.equal(types.at(-2), "message_delta");
    assert.equal(types.at(-1), "message_stop");
    const deltas = new Set(events.flatMap((e) => (e.type === "content_block_delta" ? [e.delta.type] : [])));
    assert.deepEqual([...deltas].sort(), ["input_json_delta", "signature_delta", "thinking_delta"]);
    const starts = events.filter((e) => e.type === "content_block_start");
    const stops = events.filter((e) => e.type === "content_block_stop");
    assert.deepEqual(
      starts.map((e) => e.index),
      [0, 1],
    );
    assert.deepEqual(
      stops.map((e) => e.index),
      [0, 1],
    );

    assert.deepEqual(comparable(final.content), comparable(first.message.content));
    assert.equal(final.stop_reason, "tool_use");
    assert.deepEqual(final.usage.output_tokens, first.message.usage.output_tokens);

    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    const [firstCall] = await rolloutCalls(stack.gateway.url, first.rollout.id);
    assert.equal(call!.stream, true);
    assertCaptureEquals(call!, await upstreamAnswer(stack, call!));
    assert.deepEqual(
      call!.choices[0]!.tokenIds,
      firstCall!.choices[0]!.tokenIds,
      "same request, same sampled ids, streamed or not",
    );
    assert.deepEqual(
      comparable((call!.response as Json).content),
      comparable(final.content),
      "the record holds the message as delivered",
    );
  });

  test("tool round trip: tool_result goes back as a tool message; the history re-renders the sampled tokens exactly", async () => {
    const { rollout, message } = first;
    const toolUse = message.content.find((b) => b.type === "tool_use")!;
    const reply = await client(rollout).messages.create({
      model: MODEL,
      max_tokens: 1024,
      system: SYSTEM,
      tools: TOOLS,
      messages: [
        ...ASK,
        { role: "assistant", content: message.content },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: toolUse.id, content: "README.md\npackage.json" }],
        },
      ],
    });
    assert.equal(reply.stop_reason, "end_turn");
    const text = reply.content.find((b) => b.type === "text");
    assert.match(text?.type === "text" ? text.text : "", /README\.md/, "the answer quotes the tool's output");

    const [call1, call2] = await rolloutCalls(stack.gateway.url, rollout.id);
    const forwarded = (call2!.requestForwarded as Json).messages as Json[];
    assert.deepEqual(forwarded.at(-1), { role: "tool", tool_call_id: toolUse.id, content: "README.md\npackage.json" });
    assert.equal(forwarded.at(-2)!.tool_calls[0].function.name, "run_shell_command");
    assert.equal(typeof forwarded.at(-2)!.reasoning, "string");
    assertCaptureEquals(call2!, await upstreamAnswer(stack, call2!));
    // Prompt of call 2 = prompt of call 1 ++ what call 1 sampled ++ the tool result: the prefix the trajectory tree needs.
    const sampledTurn = [...call1!.promptTokenIds!, ...call1!.choices[0]!.tokenIds];
    assert.deepEqual(call2!.promptTokenIds!.slice(0, sampledTurn.length), sampledTurn);
  });

  test("errors come in Anthropic's shape: bad requests, unknown models, unknown rollouts, mid-stream failures", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const base = `${rollout.base_urls.anthropic}/v1/messages`;

    const missing = await postJson(base, { model: MODEL, messages: ASK });
    assert.equal(missing.status, 400);
    assert.equal(missing.json.type, "error");
    assert.equal(missing.json.error.type, "invalid_request_error");
    assert.match(missing.json.error.message, /max_tokens/);

    // A server tool the upstream cannot run is dropped, and the call says so.
    const serverTool = await postJson(base, {
      model: MODEL,
      max_tokens: 10,
      messages: ASK,
      tools: [{ type: "web_search_20250305", name: "web_search" }],
    });
    assert.equal(serverTool.status, 200, serverTool.text);

    const notJson = await postJson(base, "{not json");
    assert.deepEqual(Object.keys(notJson.json), ["type", "error"]);

    await assert.rejects(
      client(rollout).messages.create({ model: "other-model", max_tokens: 10, messages: ASK }),
      (error: unknown) => {
        assert.ok(error instanceof Anthropic.NotFoundError, String(error));
        assert.equal((error.error as Json).error.type, "not_found_error");
        assert.match((error.error as Json).error.message, /other-model/);
        return true;
      },
    );
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.deepEqual(
      calls.map((c) => c.status),
      ["rejected", "ok", "rejected", "upstream_error"],
      "refusals are recorded too",
    );
    assert.match(calls[1]!.warnings![0]!, /web_search_20250305/);
    assert.equal(calls[3]!.httpStatus, 404);

    const unknown = await postJson(`${stack.gateway.url}/r/no-such-rollout/v1/messages`, {
      model: MODEL,
      max_tokens: 5,
      messages: ASK,
    });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.type, "not_found_error");

    const broken = client(rollout, { "x-sim-fault": "reset" }).messages.stream({
      model: MODEL,
      max_tokens: 200,
      messages: ASK,
    });
    await assert.rejects(broken.finalMessage());
    const after = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(after.at(-1)!.status, "upstream_error");
    assert.ok(after.at(-1)!.promptTokenIds?.length, "the partial capture is kept");
  });

  for (const [surface, path, body] of [
    ["Messages", "/v1/messages", { model: MODEL, max_tokens: 200, stream: true, messages: ASK }],
    ["Responses", "/v1/responses", { model: "claude-as-gpt", input: "Hi", stream: true }],
    [
      "Gemini",
      "/v1beta/models/claude-as-gemini:streamGenerateContent?alt=sse",
      { contents: [{ parts: [{ text: "Hi" }] }], generationConfig: { thinkingConfig: { includeThoughts: true } } },
    ],
  ] as const) {
    test(`a harness that leaves a ${surface} stream aborts the upstream request; the call is client_aborted`, async () => {
      const rollout = await createRollout(stack.gateway.url);
      const aborted = once(stack.sim.events, "aborted");
      const abort = new AbortController();
      const res = await fetch(`${stack.gateway.url}/r/${rollout.id}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-sim-fault": "stall" },
        body: JSON.stringify(body),
        signal: abort.signal,
      });
      const reader = res.body!.getReader();
      assert.match(
        new TextDecoder().decode((await reader.read()).value),
        { Messages: /message_start/, Responses: /response\.created/, Gemini: /"thought":true/ }[surface],
      );
      abort.abort();
      await aborted;
      let calls = await rolloutCalls(stack.gateway.url, rollout.id);
      for (let i = 0; i < 100 && calls.length === 0; i++)
        calls = (await sleep(20), await rolloutCalls(stack.gateway.url, rollout.id));
      assert.equal(calls[0]?.status, "client_aborted");
      assert.ok(calls[0]!.promptTokenIds!.length > 0, "what arrived before the disconnect is kept");
    });
  }

  test("?beta=true is accepted, and count_tokens counts the prompt the model sees", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const res = await postJson(`${rollout.base_urls.anthropic}/v1/messages?beta=true`, {
      model: MODEL,
      max_tokens: 50,
      system: SYSTEM,
      tools: TOOLS,
      messages: ASK,
    });
    assert.equal(res.status, 200, res.text);
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(call!.path, `/r/${rollout.id}/v1/messages?beta=true`);

    const counted = await client(rollout).messages.countTokens({
      model: MODEL,
      system: SYSTEM,
      tools: TOOLS,
      messages: ASK,
    });
    assert.equal(counted.input_tokens, call!.promptTokenIds!.length);
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(calls.length, 1, "count_tokens generates nothing and records nothing");
  });

  test("thinking off, max_tokens and stop_sequences map to Anthropic's fields", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const anthropic = client(rollout);
    const plain = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 200,
      thinking: { type: "disabled" },
      messages: [{ role: "user", content: "Hi" }],
    });
    assert.deepEqual(
      plain.content.map((b) => b.type),
      ["text"],
    );
    assert.equal(plain.stop_reason, "end_turn");
    const cut = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 5,
      messages: [{ role: "user", content: "Hi" }],
    });
    assert.equal(cut.stop_reason, "max_tokens");
    assert.equal(cut.usage.output_tokens, 5);
    const stopped = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 200,
      thinking: { type: "disabled" },
      stop_sequences: ["sim"],
      messages: [{ role: "user", content: "Hi" }],
    });
    assert.equal(stopped.stop_reason, "stop_sequence");
    assert.equal(stopped.stop_sequence, "sim");
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.deepEqual((calls[0]!.requestForwarded as Json).chat_template_kwargs, { enable_thinking: false });
    assert.deepEqual((calls[2]!.requestForwarded as Json).stop, ["sim"]);
    for (const call of calls) assert.equal(call.tokenSource, "upstream");
  });
});

describe("Anthropic Messages streaming is real streaming", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { interTokenMs: 15 }, gateway: { modelMap: "claude-*=Qwen/Qwen3-8B" } });
  });
  after(async () => {
    await stack.close();
  });

  test("the first event reaches the harness long before the upstream has finished", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const timing = await streamTiming(`${rollout.base_urls.anthropic}/v1/messages`, {
      model: MODEL,
      max_tokens: 200,
      stream: true,
      messages: ASK,
    });
    const names = eventNames(timing.text);
    assert.equal(names[0], "message_start");
    assert.equal(names.at(-1), "message_stop");
    assertFirstByteEarly(timing);
  });
});

describe("an SDK-driven agent loop on the Messages API", () => {
  const loop = useAgentLoop(proofScript("rlgate-messages"), "claude-*=Qwen/Qwen3-8B");

  test("the tools really run, and the rollout holds every call with the upstream's ids", async () => {
    const rollout = await createRollout(loop.stack.gateway.url, { harness: "anthropic-sdk-loop" });
    const anthropic = client(rollout);
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "Write rlgate-messages into proof.txt." }];
    let turns = 0;
    for (; turns < 6; turns++) {
      const stream = anthropic.messages.stream({
        model: MODEL,
        max_tokens: 1024,
        system: SYSTEM,
        tools: TOOLS,
        messages,
      });
      const reply = await stream.finalMessage();
      messages.push({ role: "assistant", content: reply.content });
      if (reply.stop_reason !== "tool_use") break;
      const results = reply.content.flatMap((block) =>
        block.type === "tool_use"
          ? [
              {
                type: "tool_result" as const,
                tool_use_id: block.id,
                content: runShell((block.input as { command: string }).command, loop.workspace),
              },
            ]
          : [],
      );
      messages.push({ role: "user", content: results });
    }
    assert.equal(readFileSync(join(loop.workspace, "proof.txt"), "utf8"), "rlgate-messages\n");
    assert.equal(turns, 2);
    const calls = await rolloutCalls(loop.stack.gateway.url, rollout.id);
    assert.equal(calls.length, 3);
    await assertLoopCaptured(loop.stack, calls);
  });
});
