// The OpenAI Responses surface, driven by the official SDK (openai): what the SDK parses equals what the upstream
// generated, the captured ids equal the upstream's, streaming follows the Responses event order, previous_response_id
// and full-history replay reach the same prompt, and errors come in OpenAI's shape.
import OpenAI from "openai";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
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

const MODEL = "gpt-5-codex";
const INSTRUCTIONS = "You are a careful coding agent.";
const TOOLS: OpenAI.Responses.FunctionTool[] = [
  {
    type: "function",
    name: "run_shell_command",
    description: "Run a shell command",
    parameters: SHELL_SCHEMA,
    strict: false,
  },
];
const ASK = "List the files in the current directory.";

function client(rollout: CreatedRollout, headers: Record<string, string> = {}): OpenAI {
  return new OpenAI({ baseURL: rollout.base_urls.openai, apiKey: "sk-test", maxRetries: 0, defaultHeaders: headers });
}

/** Output items without what differs between two runs of the same request (ids; the stream helper's parse). */
const comparable = (output: unknown): unknown => withoutKeys(output, ["id", "call_id", "parsed_arguments"]);

describe("OpenAI Responses surface (official SDK)", () => {
  let stack: Stack;
  let first: { rollout: CreatedRollout; response: OpenAI.Responses.Response };

  before(async () => {
    stack = await startStack({ sim: { seed: 11 }, gateway: { modelMap: "gpt-*=Qwen/Qwen3-8B" } });
  });
  after(async () => {
    await stack.close();
  });

  test("non-streamed function call: the SDK's output is the upstream's answer and the capture is the upstream's ids", async () => {
    const rollout = await createRollout(stack.gateway.url, { harness: "openai-sdk" });
    const response = await client(rollout).responses.create({
      model: MODEL,
      instructions: INSTRUCTIONS,
      input: ASK,
      tools: TOOLS,
    });
    first = { rollout, response };

    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.ok(call);
    assert.equal(call.api, "responses");
    const answer = await upstreamAnswer(stack, call);
    assertCaptureEquals(call, answer);
    const generated = answer.choices[0].message;

    assert.equal(response.object, "response");
    assert.equal(response.status, "completed");
    assert.equal(response.model, MODEL);
    assert.deepEqual(
      response.output.map((item) => item.type),
      ["reasoning", "function_call"],
    );
    const [reasoning, fc] = response.output;
    assert.ok(reasoning?.type === "reasoning");
    // vLLM's reasoning starts with the "\n" after <think>; the harness gets it without (the record keeps the ids).
    assert.match(generated.reasoning, /^\n/);
    assert.equal(reasoning.content?.[0]?.text, generated.reasoning.replace(/^\n+/, ""));
    assert.ok(fc?.type === "function_call");
    assert.equal(fc.name, generated.tool_calls[0].function.name);
    assert.equal(fc.arguments, generated.tool_calls[0].function.arguments);
    assert.equal(fc.call_id, (call.upstreamResponse as Json).choices[0].message.tool_calls[0].id);
    assert.equal(response.output_text, "");
    assert.equal(response.usage?.input_tokens, answer.usage.prompt_tokens);
    assert.equal(response.usage?.output_tokens, answer.usage.completion_tokens);

    const forwarded = call.requestForwarded as Json;
    assert.equal(forwarded.model, "Qwen/Qwen3-8B");
    assert.deepEqual(forwarded.messages, [
      { role: "system", content: INSTRUCTIONS },
      { role: "user", content: ASK },
    ]);
    assert.equal((call.requestReceived as Json).input, ASK);
    assert.deepEqual((call.response as Json).output, JSON.parse(JSON.stringify(response.output)));
  });

  test("streamed: the Responses event order, and the SDK's final response equals the non-streamed one", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const stream = client(rollout).responses.stream({
      model: MODEL,
      instructions: INSTRUCTIONS,
      input: ASK,
      tools: TOOLS,
    });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    const final = await stream.finalResponse();

    assert.deepEqual(types.slice(0, 2), ["response.created", "response.in_progress"]);
    assert.equal(types.at(-1), "response.completed");
    for (const type of [
      "response.output_item.added",
      "response.content_part.added",
      "response.reasoning_text.delta",
      "response.reasoning_text.done",
      "response.output_item.done",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
    ]) {
      assert.ok(types.includes(type), `${type} in ${types.join(",")}`);
    }
    assert.deepEqual(comparable(final.output), comparable(first.response.output));

    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(call!.stream, true);
    assertCaptureEquals(call!, await upstreamAnswer(stack, call!));
    assert.deepEqual(comparable((call!.response as Json).output), comparable(final.output));
  });

  test("tool round trip by previous_response_id, and by replaying the items (store: false): the same prompt", async () => {
    const { rollout, response } = first;
    const fc = response.output.find((item) => item.type === "function_call")!;
    const result = { type: "function_call_output" as const, call_id: fc.call_id, output: "README.md\npackage.json" };
    const byId = await client(rollout).responses.create({
      model: MODEL,
      instructions: INSTRUCTIONS,
      previous_response_id: response.id,
      input: [result],
      tools: TOOLS,
    });
    assert.match(byId.output_text, /README\.md/, "the answer quotes the tool's output");
    assert.equal(byId.previous_response_id, response.id);

    // A client that keeps its own history (store: false) and asks for the reasoning back as encrypted content.
    const replayRollout = await createRollout(stack.gateway.url);
    const openai = client(replayRollout);
    const firstTurn = await openai.responses.create({
      model: MODEL,
      instructions: INSTRUCTIONS,
      input: ASK,
      tools: TOOLS,
      store: false,
      include: ["reasoning.encrypted_content"],
    });
    const reasoning = firstTurn.output.find((item) => item.type === "reasoning");
    assert.ok(reasoning?.type === "reasoning" && typeof reasoning.encrypted_content === "string");
    const replayFc = firstTurn.output.find((item) => item.type === "function_call")!;
    const replay = await openai.responses.create({
      model: MODEL,
      instructions: INSTRUCTIONS,
      input: [
        { role: "user", content: ASK },
        ...firstTurn.output.map((item) => (item.type === "reasoning" ? { ...item, content: undefined } : item)),
        { ...result, call_id: replayFc.call_id },
      ] as OpenAI.Responses.ResponseInput,
      tools: TOOLS,
      store: false,
    });
    assert.equal(replay.output_text, byId.output_text);

    const [call1, call2] = await rolloutCalls(stack.gateway.url, rollout.id);
    const [, replayCall] = await rolloutCalls(stack.gateway.url, replayRollout.id);
    assertCaptureEquals(call2!, await upstreamAnswer(stack, call2!));
    const sampledTurn = [...call1!.promptTokenIds!, ...call1!.choices[0]!.tokenIds];
    assert.deepEqual(
      call2!.promptTokenIds!.slice(0, sampledTurn.length),
      sampledTurn,
      "the history re-renders the sampled tokens exactly",
    );
    assert.deepEqual(
      replayCall!.promptTokenIds,
      call2!.promptTokenIds,
      "replayed items and previous_response_id reach the same prompt",
    );

    const missing = await openai.responses
      .create({ model: MODEL, previous_response_id: firstTurn.id, input: [result] })
      .then(
        () => null,
        (error: unknown) => error,
      );
    assert.ok(missing instanceof OpenAI.BadRequestError, "a store: false response cannot be continued by id");
    assert.equal(missing.param, "previous_response_id");
  });

  test("errors come in OpenAI's shape: bad requests, unknown models, mid-stream failures", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const base = `${rollout.base_urls.openai}/responses`;
    // A hosted tool the upstream cannot run is dropped, and the call says so.
    const hosted = await postJson(base, { model: MODEL, input: ASK, tools: [{ type: "web_search" }] });
    assert.equal(hosted.status, 200, hosted.text);
    const noModel = await postJson(base, { input: ASK });
    assert.equal(noModel.status, 400);
    assert.equal(noModel.json.error.param, "model");

    const unknown = await client(rollout)
      .responses.create({ model: "other-model", input: ASK })
      .then(
        () => null,
        (e: unknown) => e,
      );
    assert.ok(unknown instanceof OpenAI.NotFoundError, String(unknown));
    assert.match(unknown.message, /other-model/);

    const res = await fetch(base, {
      method: "POST",
      headers: { "content-type": "application/json", "x-sim-fault": "reset" },
      body: JSON.stringify({ model: MODEL, input: ASK, stream: true }),
    });
    const names = eventNames(await res.text());
    assert.equal(names[0], "response.created");
    assert.equal(names.at(-1), "response.failed");
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.deepEqual(
      calls.map((c) => c.status),
      ["ok", "rejected", "upstream_error", "upstream_error"],
    );
    assert.match(calls[0]!.warnings![0]!, /hosted tool 'web_search' dropped/);
    assert.equal(calls[2]!.httpStatus, 404);
  });
});

describe("Responses streaming is real streaming", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { interTokenMs: 15 }, gateway: { modelMap: "gpt-*=Qwen/Qwen3-8B" } });
  });
  after(async () => {
    await stack.close();
  });

  test("the first event reaches the harness long before the upstream has finished", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const timing = await streamTiming(`${rollout.base_urls.openai}/responses`, {
      model: MODEL,
      input: ASK,
      stream: true,
    });
    assert.equal(eventNames(timing.text).at(-1), "response.completed");
    assertFirstByteEarly(timing);
  });
});

describe("an SDK-driven agent loop on the Responses API", () => {
  const loop = useAgentLoop(proofScript("rlgate-responses"), "gpt-*=Qwen/Qwen3-8B");

  test("the tools really run via previous_response_id, and the rollout holds every call with the upstream's ids", async () => {
    const rollout = await createRollout(loop.stack.gateway.url, { harness: "openai-sdk-loop" });
    const openai = client(rollout);
    let input: OpenAI.Responses.ResponseInput = [{ role: "user", content: "Write rlgate-responses into proof.txt." }];
    let previous: string | undefined;
    let final = "";
    for (let turn = 0; turn < 6; turn++) {
      const stream = openai.responses.stream({
        model: MODEL,
        instructions: INSTRUCTIONS,
        tools: TOOLS,
        input,
        previous_response_id: previous,
      });
      const response = await stream.finalResponse();
      previous = response.id;
      const calls = response.output.filter((item) => item.type === "function_call");
      if (calls.length === 0) {
        final = response.output_text;
        break;
      }
      input = calls.map((fc) => ({
        type: "function_call_output" as const,
        call_id: fc.call_id,
        output: runShell((JSON.parse(fc.arguments) as { command: string }).command, loop.workspace),
      }));
    }
    assert.equal(readFileSync(join(loop.workspace, "proof.txt"), "utf8"), "rlgate-responses\n");
    assert.equal(final, "proof.txt holds rlgate-responses.", "without vLLM's leading newlines");
    const calls = await rolloutCalls(loop.stack.gateway.url, rollout.id);
    assert.equal(calls.length, 3);
    await assertLoopCaptured(loop.stack, calls);
    const toolMessage = ((calls[2]!.requestForwarded as Json).messages as Json[]).at(-1);
    assert.deepEqual(toolMessage, {
      role: "tool",
      tool_call_id: toolMessage!.tool_call_id,
      content: "rlgate-responses\n",
    });
  });
});
