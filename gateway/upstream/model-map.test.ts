import assert from "node:assert/strict";
import { test } from "node:test";
import { ModelMap } from "./model-map.ts";

test("globs are tried in order, the first match wins, and unmatched names pass unchanged", () => {
  const map = ModelMap.parse(["claude-*=Qwen/Qwen3-8B, gpt-5*=Qwen/Qwen3-32B", "gpt-?=small"]);
  assert.equal(map.resolve("claude-sonnet-5-5"), "Qwen/Qwen3-8B");
  assert.equal(map.resolve("gpt-5-codex"), "Qwen/Qwen3-32B");
  assert.equal(map.resolve("gpt-4"), "small");
  assert.equal(map.resolve("gpt-4o"), "gpt-4o");
  assert.equal(map.resolve("Qwen/Qwen3-8B"), "Qwen/Qwen3-8B");
  assert.equal(map.resolve(undefined), undefined);
  assert.equal(ModelMap.parse("a.b=c").resolve("aXb"), "aXb", "dots are literal");
  assert.equal(new ModelMap().resolve("anything"), "anything");
});

test("a malformed entry is refused with an example", () => {
  assert.throws(() => ModelMap.parse("claude-*"), /pattern=served-model/);
  assert.throws(() => ModelMap.parse("=x"), /pattern=served-model/);
});
