import assert from "node:assert/strict";
import { test } from "node:test";
import { geminiRoute } from "./route.ts";

test("the model is everything between models/ and the last ':', served names with '/' and ':' included", () => {
  assert.deepEqual(geminiRoute("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent"), {
    model: "gemini-2.5-pro",
    method: "streamGenerateContent",
  });
  assert.deepEqual(geminiRoute("POST", "/v1beta/models/Qwen/Qwen3-8B:generateContent"), {
    model: "Qwen/Qwen3-8B",
    method: "generateContent",
  });
  assert.deepEqual(geminiRoute("POST", "/v1/models/qwen3:8b:countTokens"), {
    model: "qwen3:8b",
    method: "countTokens",
  });
  assert.deepEqual(geminiRoute("GET", "/v1beta/models/Qwen/Qwen3-8B"), { model: "Qwen/Qwen3-8B", method: "get" });
});

test("methods rlgate does not serve, and paths without a model, are no Gemini route", () => {
  assert.equal(geminiRoute("POST", "/v1beta/models/gemini-2.5-pro:embedContent"), null);
  assert.equal(geminiRoute("POST", "/v1beta/models/:generateContent"), null);
  assert.equal(geminiRoute("GET", "/v1beta/models/"), null);
  assert.equal(geminiRoute("DELETE", "/v1beta/models/gemini-2.5-pro"), null);
});
