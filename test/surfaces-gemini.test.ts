// The Gemini API surface, driven by Google's SDK (@google/genai): what the SDK reads from rlgate equals what the
// upstream generated and has the structure it reads from a stand-in written from Google's REST shapes, the captured
// ids equal the upstream's, a tool round trip re-renders the sampled tokens exactly in both prompt modes, and errors
// come in Google's shape.
import { ApiError, GoogleGenAI, type GenerateContentResponse, type Part } from "@google/genai";
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { ScriptTurn } from "../sim/index.ts";
import { createRollout, postJson, rolloutCalls, startStack, type CreatedRollout, type Stack } from "./helpers.ts";
import { startGeminiStandIn, type GoogleTurn, type StandIn } from "./gemini-stand-in.ts";
import {
  SHELL_SCHEMA,
  assertCaptureEquals,
  assertLoopCaptured,
  upstreamAnswer,
  type Json,
} from "./surfaces-helpers.ts";

const MODEL = "gemini-2.5-flash";
const SYSTEM = "You are a careful coding agent.";
const TOOLS = [
  {
    functionDeclarations: [
      { name: "run_shell_command", description: "Run a shell command", parametersJsonSchema: SHELL_SCHEMA },
    ],
  },
];
const CONFIG = { systemInstruction: SYSTEM, tools: TOOLS, thinkingConfig: { includeThoughts: true } };
const ASK = "List the files in the current directory.";
const SCRIPT: ScriptTurn[] = [
  { reasoning: "I will list the files.", tool_calls: [{ name: "run_shell_command", arguments: { command: "ls" } }] },
  { reasoning: "The listing is short.", content: "There are two files: a.txt and b.txt." },
];

function client(base: string, apiKey = "unused"): GoogleGenAI {
  return new GoogleGenAI({ apiKey, httpOptions: { baseUrl: base } });
}

/** What the SDK read, without what differs between two servers: ids, signatures' values, token counts. */
function comparable(response: GenerateContentResponse): Json {
  const [candidate] = response.candidates ?? [];
  return {
    parts: (candidate?.content?.parts ?? []).map((part: Part) => {
      const { thoughtSignature, functionCall, ...rest } = part;
      const call = functionCall && { name: functionCall.name, args: functionCall.args };
      return { ...rest, ...(call ? { functionCall: call } : {}), signed: thoughtSignature !== undefined };
    }),
    role: candidate?.content?.role,
    finishReason: candidate?.finishReason,
    index: candidate?.index,
    // A whole upstream answer does not tell how many of its tokens were reasoning: rlgate gives thoughtsTokenCount
    // only where the upstream streamed each chunk's ids (the streamed test compares it).
    usageKeys: Object.keys(response.usageMetadata ?? {})
      .filter((key) => key !== "thoughtsTokenCount")
      .sort(),
    modelVersion: response.modelVersion,
    hasResponseId: typeof response.responseId === "string",
    text: response.text,
    functionCalls: response.functionCalls?.map((call) => ({ name: call.name, args: call.args })),
  };
}

/** A streamed answer read as one: thought text, text, calls, the finish reason, what every chunk carries. */
async function readStream(stream: AsyncGenerator<GenerateContentResponse>): Promise<Json> {
  let thought = "";
  let text = "";
  const calls: Json[] = [];
  let finishReason: unknown;
  let signatures = 0;
  let chunks = 0;
  let usageKeys: string[] = [];
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.modelVersion, MODEL);
    assert.equal(typeof chunk.responseId, "string");
    const [candidate] = chunk.candidates ?? [];
    finishReason = candidate?.finishReason ?? finishReason;
    if (candidate?.finishReason) usageKeys = Object.keys(chunk.usageMetadata ?? {}).sort();
    for (const part of candidate?.content?.parts ?? []) {
      if (part.thoughtSignature) signatures++;
      if (part.thought) thought += part.text;
      else if (part.text !== undefined) text += part.text;
      if (part.functionCall) calls.push({ name: part.functionCall.name, args: part.functionCall.args });
    }
  }
  return { thought, text, calls, finishReason, signatures, usageKeys, streamed: chunks > 1 };
}

/** The turn Google would send for a script turn: the model's thought and text as the Qwen3 template writes them. */
function googleTurn(turn: ScriptTurn): GoogleTurn {
  return {
    thought: `${turn.reasoning}\n`,
    ...(turn.content ? { text: turn.content } : {}),
    ...(turn.tool_calls ? { calls: turn.tool_calls.map((c) => ({ name: c.name, args: c.arguments as Json })) } : {}),
  };
}

describe("Gemini surface (@google/genai SDK)", () => {
  let stack: Stack;
  let standIn: StandIn;

  before(async () => {
    stack = await startStack({ sim: { script: SCRIPT }, gateway: { modelMap: "gemini-*=Qwen/Qwen3-8B" } });
    standIn = await startGeminiStandIn(googleTurn(SCRIPT[0]!));
  });
  after(async () => {
    await stack?.close();
    await standIn?.close();
  });

  test("whole answer: the SDK reads the upstream's turn in the structure Google sends; the capture is the upstream's ids", async () => {
    const rollout = await createRollout(stack.gateway.url, { harness: "gemini-sdk" });
    const response = await client(rollout.base_urls.anthropic).models.generateContent({
      model: MODEL,
      contents: ASK,
      config: CONFIG,
    });
    const fromGoogle = await client(standIn.url).models.generateContent({
      model: MODEL,
      contents: ASK,
      config: CONFIG,
    });
    assert.deepEqual(comparable(response), comparable(fromGoogle));

    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.ok(call);
    assert.equal(call.api, "gemini");
    assert.equal(call.model, MODEL);
    const answer = await upstreamAnswer(stack, call);
    assertCaptureEquals(call, answer);
    const generated = answer.choices[0].message;
    const [thought, functionCall] = response.candidates![0]!.content!.parts!;
    assert.equal(thought!.text, generated.reasoning.replace(/^\n+/, ""));
    const upstream = call.upstreamResponse as Json;
    assert.equal(
      functionCall!.functionCall!.id,
      upstream.choices[0].message.tool_calls[0].id,
      "the upstream's call id",
    );
    assert.deepEqual(functionCall!.functionCall!.args, JSON.parse(generated.tool_calls[0].function.arguments));
    assert.equal(response.usageMetadata!.promptTokenCount, answer.usage.prompt_tokens);
    assert.equal(response.usageMetadata!.totalTokenCount, answer.usage.prompt_tokens + answer.usage.completion_tokens);

    // The record holds the request as received, as forwarded, and the response as delivered.
    const forwarded = call.requestForwarded as Json;
    assert.equal(forwarded.model, "Qwen/Qwen3-8B", "model map applied");
    assert.deepEqual(forwarded.messages[0], { role: "system", content: SYSTEM });
    assert.deepEqual(forwarded.tools[0].function, {
      name: "run_shell_command",
      parameters: SHELL_SCHEMA,
      description: "Run a shell command",
    });
    assert.deepEqual((call.requestReceived as Json).systemInstruction, { parts: [{ text: SYSTEM }], role: "user" });
    assert.deepEqual((call.response as Json).candidates, JSON.parse(JSON.stringify(response.candidates)));
  });

  test("streamed (alt=sse): the SDK reads the same turn as from Google's stream; the capture is the upstream's ids", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const params = { model: MODEL, contents: ASK, config: CONFIG };
    const read = await readStream(await client(rollout.base_urls.anthropic).models.generateContentStream(params));
    const fromGoogle = await readStream(await client(standIn.url).models.generateContentStream(params));
    assert.deepEqual(read, fromGoogle);
    assert.equal(read.signatures, 1);

    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(call!.stream, true);
    assert.match(call!.path, /:streamGenerateContent\?alt=sse$/);
    assertCaptureEquals(call!, await upstreamAnswer(stack, call!));
    const record = call!.response as Json;
    assert.equal(record.candidates[0].finishReason, "STOP");
    assert.equal(record.candidates[0].content.parts[1].functionCall.name, "run_shell_command");
  });

  test("stream framing as Google's: `data: …\\r\\n\\r\\n` events with alt=sse, one JSON array without", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const body = {
      contents: [{ role: "user", parts: [{ text: ASK }] }],
      tools: TOOLS,
      generationConfig: { thinkingConfig: { includeThoughts: true } },
    };
    const url = `${rollout.base_urls.anthropic}/v1beta/models/${MODEL}:streamGenerateContent`;
    const sse = await fetch(`${url}?alt=sse`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    assert.match(sse.headers.get("content-type") ?? "", /^text\/event-stream/);
    const events = (await sse.text()).split("\r\n\r\n");
    assert.equal(events.pop(), "", "every event ends with \\r\\n\\r\\n");
    const parsed = events.map((event) => {
      assert.match(event, /^data: \{/);
      return JSON.parse(event.slice(6)) as Json;
    });
    const array = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    assert.match(array.headers.get("content-type") ?? "", /^application\/json/);
    const elements = JSON.parse(await array.text()) as Json[];
    assert.ok(Array.isArray(elements) && elements.length > 1);
    const shape = (chunks: Json[]) =>
      chunks.map((c) =>
        withoutIds(c.candidates.map((k: Json) => ({ ...k, content: k.content?.parts?.map(Object.keys) }))),
      );
    assert.deepEqual(shape(elements), shape(parsed), "the array holds the events' responses");
  });

  test("countTokens counts the prompt the model sees (the captured prompt length)", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const ai = client(rollout.base_urls.anthropic);
    await ai.models.generateContent({ model: MODEL, contents: "Say hello." });
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    const counted = await ai.models.countTokens({ model: MODEL, contents: "Say hello." });
    assert.equal(counted.totalTokens, call!.promptTokenIds!.length);
    // With a whole generateContentRequest, the system instruction and tools count too.
    const whole = await postJson(`${rollout.base_urls.anthropic}/v1beta/models/${MODEL}:countTokens`, {
      generateContentRequest: {
        model: `models/${MODEL}`,
        contents: [{ role: "user", parts: [{ text: "Say hello." }] }],
        systemInstruction: { parts: [{ text: SYSTEM }] },
        tools: TOOLS,
      },
    });
    assert.equal(whole.status, 200, whole.text);
    assert.ok(whole.json.totalTokens > counted.totalTokens!);
    assert.equal((await rolloutCalls(stack.gateway.url, rollout.id)).length, 1, "counting records no call");
  });

  test("a rollout key as x-goog-api-key or ?key= attributes the call; neither is recorded or sent upstream", async () => {
    const rollout = await createRollout(stack.gateway.url);
    await client(stack.gateway.url, rollout.key).models.generateContent({ model: MODEL, contents: "Say hello." });
    const res = await postJson(`${stack.gateway.url}/v1beta/models/${MODEL}:generateContent?key=${rollout.key}`, {
      contents: [{ parts: [{ text: "Say hello." }] }],
    });
    assert.equal(res.status, 200, res.text);
    // A key of Google's own in the query is the harness's credential: it is not recorded either.
    const google = await postJson(
      `${rollout.base_urls.anthropic}/v1beta/models/${MODEL}:generateContent?key=AIza-own&x=1`,
      {
        contents: [{ parts: [{ text: "Say hello." }] }],
      },
    );
    assert.equal(google.status, 200, google.text);
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(calls.length, 3);
    for (const call of calls.slice(0, 2)) {
      assert.equal(call.path, `/v1beta/models/${MODEL}:generateContent`);
      assert.ok(!JSON.stringify(call).includes(rollout.key), "the key is nowhere in the record");
    }
    assert.equal(calls[2]!.path, `/r/${rollout.id}/v1beta/models/${MODEL}:generateContent?x=1`);
  });

  test("GET …/models/{model}: the SDK reads the model, its limits the upstream's context length", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const model = await client(rollout.base_urls.anthropic).models.get({ model: MODEL });
    assert.equal(model.name, `models/${MODEL}`);
    assert.ok((model.inputTokenLimit ?? 0) > 0);
    assert.ok(model.supportedActions?.includes("generateContent"));
  });
});

function withoutIds(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value), (key, v) => (key === "id" ? undefined : v));
}

/** A Gemini-CLI-like session: history keeps the model's parts without its thought parts (signatures kept). */
async function toolRoundTrip(stack: Stack, stream: boolean): Promise<{ rollout: CreatedRollout; answers: Json[] }> {
  const rollout = await createRollout(stack.gateway.url, { harness: "gemini-sdk" });
  const ai = client(rollout.base_urls.anthropic);
  const contents: Json[] = [{ role: "user", parts: [{ text: ASK }] }];
  const answers: Json[] = [];
  for (let turn = 0; turn < SCRIPT.length; turn++) {
    const params = { model: MODEL, contents, config: CONFIG };
    let parts: Part[] = [];
    if (stream) {
      for await (const chunk of await ai.models.generateContentStream(params))
        parts.push(...(chunk.candidates?.[0]?.content?.parts ?? []));
    } else parts = (await ai.models.generateContent(params)).candidates![0]!.content!.parts!;
    const kept = parts.filter((part) => !part.thought);
    answers.push({ parts });
    contents.push({ role: "model", parts: mergeText(kept) });
    const calls = kept.filter((part) => part.functionCall);
    if (!calls.length) break;
    contents.push({
      role: "user",
      parts: calls.map(({ functionCall }) => ({
        functionResponse: { id: functionCall!.id, name: functionCall!.name, response: { output: "a.txt\nb.txt" } },
      })),
    });
  }
  return { rollout, answers };
}

/** Consecutive text parts as one (Gemini CLI's consolidation), the first one's signature kept. */
function mergeText(parts: Part[]): Part[] {
  const out: Part[] = [];
  for (const part of parts) {
    const last = out[out.length - 1];
    if (last?.text !== undefined && part.text !== undefined && !part.functionCall) last.text += part.text;
    else out.push({ ...part });
  }
  return out;
}

for (const prompts of ["messages", "tokens"] as const) {
  describe(`Gemini tool round trip (prompts ${prompts})`, () => {
    let stack: Stack;
    before(async () => {
      stack = await startStack({ sim: { script: SCRIPT }, gateway: { modelMap: "gemini-*=Qwen/Qwen3-8B", prompts } });
    });
    after(async () => {
      await stack?.close();
    });

    for (const stream of [false, true]) {
      test(`${stream ? "streamed" : "whole"}: functionCall → functionResponse re-renders the sampled tokens exactly: one trajectory`, async () => {
        const { rollout, answers } = await toolRoundTrip(stack, stream);
        assert.equal(answers.length, 2);
        const calls = await rolloutCalls(stack.gateway.url, rollout.id);
        assert.equal(calls.length, 2);
        await assertLoopCaptured(stack, calls, prompts === "tokens" ? "/v1/completions" : undefined);
        if (prompts === "tokens") assert.deepEqual(calls[1]!.prompt?.parent, { seq: calls[0]!.seq, choice: 0 });
        const forwarded = calls[1]!.requestForwarded as Json;
        if (prompts === "messages") {
          // The thought parts were dropped by the client: the signature gave the reasoning back.
          const assistant = forwarded.messages.find((m: Json) => m.role === "assistant");
          assert.equal(assistant.reasoning, `${SCRIPT[0]!.reasoning}\n`);
          assert.deepEqual(forwarded.messages.at(-1), {
            role: "tool",
            tool_call_id: assistant.tool_calls[0].id,
            content: JSON.stringify({ output: "a.txt\nb.txt" }),
          });
        }
        const finished = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
        const stats = finished.json.trajectories.stats;
        assert.equal(stats.retained_trajectories, 1);
        assert.equal(
          Object.values(stats.breaks as Record<string, number>).reduce((a, b) => a + b, 0),
          0,
        );
        assert.equal(stats.trained_tokens, stats.sampled_tokens);
      });
    }
  });
}

describe("Gemini on a gateway that requires rollout keys", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ gateway: { modelMap: "gemini-*=Qwen/Qwen3-8B", requireKey: true } });
  });
  after(async () => {
    await stack?.close();
  });

  test("the SDK's key (x-goog-api-key) is the rollout key; without it, Google's 401", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const answer = await client(stack.gateway.url, rollout.key).models.generateContent({
      model: MODEL,
      contents: "Hi",
    });
    assert.equal(answer.candidates?.[0]?.finishReason, "STOP");
    assert.equal((await rolloutCalls(stack.gateway.url, rollout.id)).length, 1);
    await assert.rejects(
      client(rollout.base_urls.anthropic, "AIza-not-a-rollout-key").models.generateContent({
        model: MODEL,
        contents: "Hi",
      }),
      (error: unknown) => error instanceof ApiError && error.status === 401 && /x-goog-api-key/.test(error.message),
    );
  });
});

describe("Gemini errors (Google's shape)", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ gateway: { modelMap: "gemini-*=Qwen/Qwen3-8B" } });
  });
  after(async () => {
    await stack?.close();
  });

  async function expectGoogleError(url: string, body: unknown, code: number, status: string, message: RegExp) {
    const res = await postJson(url, body);
    assert.equal(res.status, code, res.text);
    // rlgate's own refusals name their code in an ErrorInfo detail, as Google's errors do; an upstream's has none.
    const { details, ...error } = res.json.error;
    assert.deepEqual(Object.keys(error).sort(), ["code", "message", "status"]);
    if (details !== undefined) assert.match(details[0].reason, /^RLGATE_/);
    assert.equal(res.json.error.code, code);
    assert.equal(res.json.error.status, status);
    assert.match(res.json.error.message, message);
  }

  test("bad requests are 400 INVALID_ARGUMENT naming the field; the SDK raises an ApiError", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const url = `${rollout.base_urls.anthropic}/v1beta/models/${MODEL}:generateContent`;
    await expectGoogleError(url, {}, 400, "INVALID_ARGUMENT", /contents/);
    await expectGoogleError(url, { contents: [{ role: "tool", parts: [] }] }, 400, "INVALID_ARGUMENT", /role/);
    await expectGoogleError(url, { contents: [{ parts: [{}] }] }, 400, "INVALID_ARGUMENT", /contents\[0\]\.parts\[0\]/);
    await expectGoogleError(
      url,
      { contents: [{ parts: [{ text: { toString: 1 } }] }] },
      400,
      "INVALID_ARGUMENT",
      /parts/,
    );
    await expectGoogleError(
      url,
      { contents: [{ parts: [{ text: "hi" }] }], generationConfig: { temperature: "hot" } },
      400,
      "INVALID_ARGUMENT",
      /temperature/,
    );
    await expectGoogleError(
      url,
      { contents: [{ parts: [{ text: "hi" }] }], cachedContent: "cachedContents/x" },
      400,
      "INVALID_ARGUMENT",
      /cachedContent/,
    );
    await assert.rejects(
      client(rollout.base_urls.anthropic).models.generateContent({
        model: MODEL,
        contents: [{ role: "model", parts: [{ functionResponse: { name: "x", response: {} } }] }],
      }),
      (error: unknown) => error instanceof ApiError && error.status === 400,
    );
  });

  test("unknown rollouts, unknown methods, finished rollouts and upstream errors keep Google's shape", async () => {
    const body = { contents: [{ parts: [{ text: "hi" }] }] };
    await expectGoogleError(
      `${stack.gateway.url}/r/nope/v1beta/models/${MODEL}:generateContent`,
      body,
      404,
      "NOT_FOUND",
      /unknown rollout/,
    );
    const rollout = await createRollout(stack.gateway.url);
    await expectGoogleError(
      `${rollout.base_urls.anthropic}/v1beta/models/${MODEL}:embedContent`,
      body,
      404,
      "NOT_FOUND",
      /no route/,
    );
    // An unmapped model reaches the sim as it is: the upstream's 404 comes back in Google's shape.
    await expectGoogleError(
      `${rollout.base_urls.anthropic}/v1beta/models/other-model:generateContent`,
      body,
      404,
      "NOT_FOUND",
      /other-model/,
    );
    await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 0 });
    await expectGoogleError(
      `${rollout.base_urls.anthropic}/v1beta/models/${MODEL}:generateContent`,
      body,
      409,
      "ABORTED",
      /finished/,
    );
  });

  test("upstream failures: a 500 in Google's shape; a stream cut mid-answer makes the SDK throw, the partial capture kept", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const base = rollout.base_urls.anthropic;
    const failing = (fault: string) =>
      new GoogleGenAI({ apiKey: "unused", httpOptions: { baseUrl: base, headers: { "x-sim-fault": fault } } });
    await assert.rejects(
      failing("error").models.generateContent({ model: MODEL, contents: ASK }),
      (error: unknown) => error instanceof ApiError && error.status === 500,
    );
    const stream = await failing("reset").models.generateContentStream({
      model: MODEL,
      contents: ASK,
      config: { thinkingConfig: { includeThoughts: true }, maxOutputTokens: 300 },
    });
    await assert.rejects(async () => {
      for await (const _chunk of stream);
    });
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.deepEqual(
      calls.map((c) => c.status),
      ["upstream_error", "upstream_error"],
    );
    assert.equal(calls[0]!.httpStatus, 500);
    assert.ok(calls[1]!.promptTokenIds?.length, "the partial capture is kept");
  });

  test("dropped features are warnings on the call: Google's tools, safety settings, non-image media", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const res = await postJson(`${rollout.base_urls.anthropic}/v1beta/models/${MODEL}:generateContent`, {
      contents: [
        { role: "user", parts: [{ text: "hi" }, { inlineData: { mimeType: "application/pdf", data: "JVBERi0=" } }] },
      ],
      tools: [{ googleSearch: {} }],
      safetySettings: [{ category: "HARM_CATEGORY_HARASSMENT", threshold: "BLOCK_NONE" }],
    });
    assert.equal(res.status, 200, res.text);
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    const warnings = (call!.warnings ?? []).join("\n");
    assert.match(warnings, /googleSearch/);
    assert.match(warnings, /safetySettings/);
    assert.match(warnings, /application\/pdf/);
  });
});
