import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { test } from "node:test";
import { tempDir } from "../test/helpers.ts";
import { resolveHarness } from "./harnesses.ts";
import { OPENCLAW_APIS, openclawConfig, openclawRuntime } from "./openclaw.ts";

const ctx = {
  prompt: "fix it",
  origin: "http://127.0.0.1:8700",
  rolloutId: "r_1",
  model: "Qwen/Qwen3-8B",
  home: "/h",
  workspace: "/workspace",
};

test("each provider API points at the rollout's base of its style; nothing else is configured to be reached", () => {
  const bases = OPENCLAW_APIS.map((api) => {
    const config = openclawConfig(ctx, api) as any;
    assert.equal(config.models.mode, "replace");
    assert.deepEqual(Object.keys(config.models.providers), ["rlgate"]);
    assert.equal(config.agents.defaults.model.primary, "rlgate/Qwen/Qwen3-8B");
    assert.equal(config.update.checkOnStart, false);
    assert.equal(config.telemetry.enabled, false);
    return [config.models.providers.rlgate.api, config.models.providers.rlgate.baseUrl];
  });
  assert.deepEqual(bases, [
    ["openai-completions", "http://127.0.0.1:8700/r/r_1/v1"],
    ["openai-responses", "http://127.0.0.1:8700/r/r_1/v1"],
    ["anthropic-messages", "http://127.0.0.1:8700/r/r_1"],
  ]);
});

test("the presets: openclaw (chat completions), openclaw-responses, openclaw-messages", () => {
  for (const name of ["openclaw", "openclaw-responses", "openclaw-messages"]) {
    const harness = resolveHarness(name);
    assert.equal(harness.name, name);
    assert.ok(harness.minMemoryBytes! > 4 * 1024 ** 3);
  }
});

test("without its install, one sentence that says to run npm install", () => {
  const dir = tempDir("openclaw-missing");
  try {
    const runtime = openclawRuntime(dir);
    assert.ok("error" in runtime);
    assert.match(runtime.error, /not installed .*run npm install/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
