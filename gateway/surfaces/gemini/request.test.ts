import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { reasoningSignature } from "../../translate/carried-reasoning.ts";
import { GatewayError } from "../../errors.ts";
import { parseGeminiRequest, toChatRequest } from "./request.ts";
import { jsonSchemaOf } from "./schema.ts";

function chat(body: unknown, warnings: string[] = [], stream = false): Record<string, any> {
  return toChatRequest(parseGeminiRequest(body), "gemini-2.5-flash", stream, warnings);
}

function refused(body: unknown, param: RegExp): void {
  assert.throws(
    () => chat(body),
    (error: unknown) => error instanceof GatewayError && error.status === 400 && param.test(error.message),
  );
}

describe("Gemini request → chat completion", () => {
  test("a Gemini-CLI-like history: system, user text, model turn with a call, the function's response", () => {
    const signature = reasoningSignature("I will look.");
    const out = chat(
      {
        systemInstruction: { role: "user", parts: [{ text: "You are an agent." }] },
        contents: [
          { role: "user", parts: [{ text: "context" }, { text: "List the files." }] },
          {
            role: "model",
            parts: [{ functionCall: { id: "call-1", name: "ls", args: { path: "." } }, thoughtSignature: signature }],
          },
          {
            role: "user",
            parts: [{ functionResponse: { id: "call-1", name: "ls", response: { output: "a b" } } }, { text: "go on" }],
          },
        ],
      },
      [],
      true,
    );
    assert.deepEqual(out["messages"], [
      { role: "system", content: "You are an agent." },
      {
        role: "user",
        content: [
          { type: "text", text: "context" },
          { type: "text", text: "List the files." },
        ],
      },
      {
        role: "assistant",
        content: "",
        reasoning: "I will look.",
        reasoning_content: "I will look.",
        tool_calls: [{ id: "call-1", type: "function", function: { name: "ls", arguments: '{"path":"."}' } }],
      },
      { role: "tool", tool_call_id: "call-1", content: '{"output":"a b"}' },
      { role: "user", content: "go on" },
    ]);
    assert.equal(out["stream"], true);
    assert.deepEqual(out["stream_options"], { include_usage: true });
  });

  test("thought parts are the reasoning; a signature rlgate did not write gives none", () => {
    const [, model] = chat({
      contents: [
        { parts: [{ text: "hi" }] },
        {
          role: "model",
          parts: [
            { text: "Thinking ", thought: true },
            { text: "hard.", thought: true },
            { text: "Hello", thoughtSignature: reasoningSignature("ignored: thought parts win") },
            { text: " there" },
          ],
        },
      ],
    })["messages"];
    assert.equal(model.reasoning, "Thinking hard.");
    assert.equal(model.content, "Hello there");
    const [, foreign] = chat({
      contents: [
        { parts: [{ text: "hi" }] },
        { role: "model", parts: [{ text: "Hi", thoughtSignature: "AY89a18iOcFus5wr" }] },
      ],
    })["messages"];
    assert.equal(foreign.reasoning, undefined);
  });

  test("calls and responses without ids are paired by name, in order, with ids from their place", () => {
    const messages = chat({
      contents: [
        { parts: [{ text: "hi" }] },
        {
          role: "model",
          parts: [{ functionCall: { name: "a", args: {} } }, { functionCall: { name: "b", args: {} } }],
        },
        {
          parts: [
            { functionResponse: { name: "b", response: { r: 2 } } },
            { functionResponse: { name: "a", response: { r: 1 } } },
          ],
        },
      ],
    })["messages"];
    assert.deepEqual(
      messages[1].tool_calls.map((c: any) => c.id),
      ["call_1_0", "call_1_1"],
    );
    assert.deepEqual(
      messages.slice(2).map((m: any) => [m.tool_call_id, m.content]),
      [
        ["call_1_1", '{"r":2}'],
        ["call_1_0", '{"r":1}'],
      ],
    );
  });

  test("tools, tool config and generation config map to their chat counterparts", () => {
    const out = chat({
      contents: [{ parts: [{ text: "hi" }] }],
      tools: [
        {
          functionDeclarations: [
            { name: "ls", description: "list", parameters: { type: "OBJECT", properties: { p: { type: "STRING" } } } },
            { name: "cat", parametersJsonSchema: { type: "object", properties: { f: { type: "string" } } } },
            { name: "pwd" },
          ],
        },
      ],
      toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["cat"] } },
      generationConfig: {
        temperature: 0.2,
        topP: 0.9,
        topK: 20,
        maxOutputTokens: 64,
        stopSequences: ["END"],
        candidateCount: 2,
        seed: 7,
        thinkingConfig: { thinkingBudget: 0 },
      },
    });
    assert.deepEqual(
      out["tools"].map((t: any) => t.function),
      [
        { name: "ls", description: "list", parameters: { type: "object", properties: { p: { type: "string" } } } },
        { name: "cat", parameters: { type: "object", properties: { f: { type: "string" } } } },
        { name: "pwd", parameters: { type: "object", properties: {} } },
      ],
    );
    assert.deepEqual(out["tool_choice"], { type: "function", function: { name: "cat" } });
    const { model: _model, messages: _messages, tools: _tools, tool_choice: _choice, ...rest } = out;
    assert.deepEqual(rest, {
      temperature: 0.2,
      top_p: 0.9,
      top_k: 20,
      max_tokens: 64,
      stop: ["END"],
      n: 2,
      seed: 7,
      chat_template_kwargs: { enable_thinking: false },
    });
  });

  test("structured output: responseJsonSchema (or responseSchema) and the JSON mime type", () => {
    const schema = { type: "object", properties: { reasoning: { type: "string" } } };
    // Gemini CLI's routing call: a response schema in Google's upper-case words under responseJsonSchema.
    assert.deepEqual(
      chat({
        contents: [{ parts: [{ text: "x" }] }],
        generationConfig: {
          responseMimeType: "application/json",
          responseJsonSchema: { type: "OBJECT", properties: { reasoning: { type: "STRING" } } },
        },
      })["response_format"],
      { type: "json_schema", json_schema: { name: "response", schema } },
    );
    assert.deepEqual(
      chat({ contents: [{ parts: [{ text: "x" }] }], generationConfig: { responseJsonSchema: schema } })[
        "response_format"
      ],
      { type: "json_schema", json_schema: { name: "response", schema } },
    );
    assert.deepEqual(
      chat({ contents: [{ parts: [{ text: "x" }] }], generationConfig: { responseMimeType: "application/json" } })[
        "response_format"
      ],
      { type: "json_object" },
    );
  });

  test("what the upstream cannot take is dropped with a warning; images travel as data: URLs", () => {
    const warnings: string[] = [];
    const out = chat(
      {
        contents: [
          {
            parts: [
              { text: "see" },
              { inlineData: { mimeType: "image/png", data: "iVBO" } },
              { inlineData: { mimeType: "audio/wav", data: "UklG" } },
              { executableCode: { language: "PYTHON", code: "1" } },
            ],
          },
        ],
        tools: [{ googleSearch: {} }, { codeExecution: {} }],
        generationConfig: { responseModalities: ["AUDIO"] },
      },
      warnings,
    );
    assert.deepEqual(out["messages"][0].content, [
      { type: "text", text: "see" },
      { type: "image_url", image_url: { url: "data:image/png;base64,iVBO" } },
    ]);
    assert.equal(out["tools"], undefined);
    assert.equal(warnings.length, 5, warnings.join("\n"));
  });

  test("malformed requests are refused naming the field", () => {
    refused(null, /request body/);
    refused({ contents: [] }, /contents/);
    refused({ contents: [{ role: "system", parts: [{ text: "x" }] }] }, /contents\[0\]\.role/);
    refused({ contents: [{ parts: "x" }] }, /contents\[0\]\.parts/);
    refused({ contents: [{ parts: [{ foo: 1 }] }] }, /contents\[0\]\.parts\[0\]/);
    refused({ contents: [{ parts: [{ functionCall: { name: "a" } }] }] }, /model turn/);
    refused({ contents: [{ role: "model", parts: [{ functionCall: { name: "a", args: [1] } }] }] }, /args/);
    refused({ contents: [{ parts: [{ text: "x" }] }], tools: [{ functionDeclarations: [{}] }] }, /name/);
    refused(
      { contents: [{ parts: [{ text: "x" }] }], toolConfig: { functionCallingConfig: { mode: "SOME" } } },
      /mode/,
    );
    refused({ contents: [{ parts: [{ text: "x" }] }], generationConfig: { topK: "many" } }, /topK/);
    refused({ contents: [{ parts: [{ text: "x" }] }], systemInstruction: { parts: [{ inlineData: {} }] } }, /system/);
    refused({ contents: [{ parts: [{ text: "x" }] }], cachedContent: "cachedContents/1" }, /cachedContent/);
  });
});

describe("Gemini (OpenAPI) schema → JSON Schema", () => {
  test("type names in lower case, nullable as a null type, Google's ordering hint dropped", () => {
    assert.deepEqual(
      jsonSchemaOf({
        type: "OBJECT",
        propertyOrdering: ["a", "b"],
        properties: {
          a: { type: "ARRAY", items: { type: "INTEGER" }, nullable: true },
          b: { type: "STRING", enum: ["X", "Y"], description: "Upper case STAYS" },
        },
        required: ["a"],
      }),
      {
        type: "object",
        properties: {
          a: { type: ["array", "null"], items: { type: "integer" } },
          b: { type: "string", enum: ["X", "Y"], description: "Upper case STAYS" },
        },
        required: ["a"],
      },
    );
  });
});
