// Capture through an SGLang upstream (the sim's SGLang flavour): SGLang's chat streams carry no token ids, so a
// streamed chat call goes upstream unstreamed (with return_token_ids) and is re-emitted to the harness as a stream;
// completions stream ids natively. Every surface is captured exactly, and the harness gets SGLang's own shapes.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { renderChat } from "../tokenizer/chat-template.ts";
import { TOOLS, createRollout, postJson, rolloutCalls, startStack, type Stack } from "./helpers.ts";
import {
  SHELL_SCHEMA,
  assertCaptureEquals,
  postStream,
  upstreamAnswer,
  withoutKeys,
  type Json,
} from "./surfaces-helpers.ts";

const MODEL = "Qwen/Qwen3-8B";
const MESSAGES = [
  { role: "system", content: "You are a careful coding agent." },
  { role: "user", content: "List the files in the current directory." },
];

const comparable = (value: unknown): unknown => withoutKeys(value, ["id", "created"]);

describe("SGLang upstream", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      sim: { flavor: "sglang", seed: 4 },
      gateway: { upstreamFlavor: "sglang", modelMap: "claude-*=Qwen/Qwen3-8B,gpt-*=Qwen/Qwen3-8B" },
    });
  });
  after(async () => {
    await stack.close();
  });

  test("a streamed chat call is captured exactly: unstreamed upstream with ids, re-emitted as SGLang's stream", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const request = {
      model: MODEL,
      messages: MESSAGES,
      tools: TOOLS,
      stream: true,
      stream_options: { include_usage: true },
    };
    const { status, contentType, events } = await postStream(`${rollout.base_urls.openai}/chat/completions`, request);
    assert.equal(status, 200);
    assert.match(contentType, /text\/event-stream/);
    assert.equal(events.at(-1), "[DONE]");
    const chunks = events.slice(0, -1) as Json[];
    for (const chunk of chunks) {
      for (const choice of chunk.choices) {
        assert.ok(!("token_ids" in choice) && !("prompt_token_ids" in choice), "SGLang streams carry no ids");
        assert.equal(choice.logprobs, null);
      }
    }
    assert.equal(chunks.at(-1)!.usage.completion_tokens > 0, true, "the usage chunk the harness asked for");

    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(call!.stream, true);
    const forwarded = call!.requestForwarded as Json;
    assert.equal(forwarded.stream, false);
    assert.equal(forwarded.stream_options, undefined);
    assert.equal(forwarded.return_token_ids, true);
    const answer = await upstreamAnswer(stack, call!);
    assert.ok(Array.isArray(answer.choices[0].prompt_token_ids), "SGLang reports prompt ids on the choice");
    assertCaptureEquals(call!, answer);

    // The re-emitted stream says what the whole answer says.
    const message = answer.choices[0].message;
    const deltas = chunks.flatMap((c) => c.choices.map((ch: Json) => ch.delta));
    assert.equal(deltas.map((d) => d.reasoning_content ?? "").join(""), message.reasoning_content);
    assert.equal(
      deltas
        .flatMap((d) => d.tool_calls ?? [])
        .map((t: Json) => t.function.arguments)
        .join(""),
      message.tool_calls[0].function.arguments,
    );
    assert.equal(chunks.flatMap((c) => c.choices.map((ch: Json) => ch.finish_reason)).filter(Boolean)[0], "tool_calls");
  });

  test("a non-streamed chat call: ids captured, SGLang's shape given back without the fields rlgate asked for", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const request = { model: MODEL, messages: MESSAGES };
    const res = await postJson(`${rollout.base_urls.openai}/chat/completions`, request);
    const plain = await postJson(`${stack.sim.url}/v1/chat/completions`, request);
    assert.deepEqual(comparable(res.json), comparable(plain.json));
    assert.ok(!("token_ids" in res.json.choices[0]));
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assertCaptureEquals(call!, await upstreamAnswer(stack, call!));
  });

  test("a harness asking SGLang itself for ids on a stream gets SGLang's answer (a 400)", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const request = { model: MODEL, messages: MESSAGES, stream: true, return_token_ids: true };
    const res = await postJson(`${rollout.base_urls.openai}/chat/completions`, request);
    const direct = await postJson(`${stack.sim.url}/v1/chat/completions`, request);
    assert.equal(res.status, 400);
    assert.deepEqual(res.json, direct.json);
    assert.equal(res.json.object, "error");
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(call!.status, "upstream_error");
  });

  test("streamed completions carry ids natively and are captured exactly", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const prompt = renderChat([{ role: "user", content: "Say hello." }]);
    const { events } = await postStream(`${rollout.base_urls.openai}/completions`, {
      model: MODEL,
      prompt,
      max_tokens: 40,
      stream: true,
    });
    const chunks = events.slice(0, -1) as Json[];
    for (const chunk of chunks) for (const choice of chunk.choices) assert.ok(!("token_ids" in choice));
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal((call!.requestForwarded as Json).stream, true, "completions stream upstream too");
    const answer = await upstreamAnswer(stack, call!, "/v1/completions");
    assertCaptureEquals(call!, answer);
    assert.equal(chunks.map((c) => c.choices[0]?.text ?? "").join(""), answer.choices[0].text);
  });

  test("Messages and Responses stream through SGLang with exact capture (official SDKs)", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const anthropic = new Anthropic({ baseURL: rollout.base_urls.anthropic, apiKey: "x", maxRetries: 0 });
    const tools = [{ name: "run_shell_command", description: "Run a shell command", input_schema: SHELL_SCHEMA }];
    const stream = anthropic.messages.stream({
      model: "claude-sonnet-5-5",
      max_tokens: 512,
      tools,
      messages: [{ role: "user", content: "List the files." }],
    });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    const message = await stream.finalMessage();
    assert.equal(types[0], "message_start");
    assert.equal(types.at(-1), "message_stop");
    assert.equal(message.stop_reason, "tool_use");
    assert.ok(message.usage.input_tokens > 0);

    const openai = new OpenAI({ baseURL: rollout.base_urls.openai, apiKey: "x", maxRetries: 0 });
    const response = await openai.responses.stream({ model: "gpt-5", input: "Hello there" }).finalResponse();
    assert.match(response.output_text, /Hello there/);

    const counted = await anthropic.messages.countTokens({
      model: "claude-sonnet-5-5",
      tools,
      messages: [{ role: "user", content: "List the files." }],
    });
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(calls.length, 2);
    for (const call of calls) {
      assert.equal(call.stream, true);
      assert.equal((call.requestForwarded as Json).stream, false);
      assertCaptureEquals(call, await upstreamAnswer(stack, call));
    }
    assert.equal(
      counted.input_tokens,
      calls[0]!.promptTokenIds!.length,
      "counted locally with the Qwen3 template: SGLang has no chat /tokenize",
    );
  });
});
