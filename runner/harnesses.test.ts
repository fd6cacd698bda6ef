import assert from "node:assert/strict";
import { test } from "node:test";
import { HARNESS_PRESETS, HARNESSES, resolveHarness } from "./harnesses.ts";
import { crushUnavailable } from "./harnesses/crush.ts";

const ctx = {
  prompt: "fix it",
  origin: "http://127.0.0.1:8700",
  rolloutId: "r_1",
  model: "Qwen/Qwen3-8B",
  home: "/home/agent",
  workspace: "/workspace",
};
/** JSON schema URLs name a file format, nothing a harness fetches. */
const SCHEMA = /"\$schema": "https:\/\/[^"]+"/g;

test("every preset points its CLI at the rollout and at nothing else reachable", () => {
  for (const h of HARNESSES) {
    if (h.unavailable?.() && h.name.startsWith("openclaw")) continue; // its launch needs its runtime installed
    for (const options of [{}, { resume: true }, { compact: true }]) {
      const launch = h.launch(ctx, options);
      const text = JSON.stringify(launch).replaceAll("\\", "").replace(SCHEMA, "");
      const urls = text.match(/https?:\/\/[^\s"',]+/g) ?? [];
      assert.ok(urls.length > 0, `${h.name}: no base URL at all`);
      for (const url of urls) assert.ok(url.startsWith(`${ctx.origin}/r/${ctx.rolloutId}`), `${h.name}: ${url}`);
      assert.ok(launch.argv.includes(ctx.prompt), `${h.name}: the prompt is an argument of its own`);
    }
  }
});

test("preset names and the short names users type; a template is any command with {prompt}", () => {
  assert.deepEqual(
    HARNESSES.map((h) => h.name),
    [
      "qwen-code",
      "claude-code",
      "codex",
      "opencode",
      "kilo",
      "crush",
      "gemini",
      "pi",
      "pi-responses",
      "pi-messages",
      "openclaw",
      "openclaw-responses",
      "openclaw-messages",
    ],
  );
  assert.equal(HARNESS_PRESETS["qwen"], HARNESS_PRESETS["qwen-code"]);
  assert.equal(HARNESS_PRESETS["claude"], HARNESS_PRESETS["claude-code"]);
  assert.equal(HARNESS_PRESETS["kilo-code"], HARNESS_PRESETS["kilo"]);
  const custom = resolveHarness("my-agent --task {prompt}").launch(ctx);
  assert.deepEqual(custom.argv, ["bash", "-c", "my-agent --task 'fix it'"]);
  assert.equal(custom.env["OPENAI_BASE_URL"], "http://127.0.0.1:8700/r/r_1/v1");
  assert.throws(() => resolveHarness("kilocode"), /unknown harness 'kilocode': a preset \(qwen-code, /);
});

test("Gemini CLI: API-key auth, its trust prompt answered, nothing of Google's switched on, its own model name", () => {
  const launch = HARNESS_PRESETS["gemini"]!.launch({ ...ctx, model: "gemini-2.5-pro" });
  assert.equal(launch.env["GOOGLE_GEMINI_BASE_URL"], "http://127.0.0.1:8700/r/r_1");
  assert.equal(launch.env["GEMINI_CLI_TRUST_WORKSPACE"], "true");
  const settings = JSON.parse(launch.files[".gemini/settings.json"]!);
  assert.equal(settings.security.auth.selectedType, "gemini-api-key");
  assert.equal(settings.telemetry.enabled, false);
  assert.equal(settings.privacy.usageStatisticsEnabled, false);
  assert.equal(settings.general.enableAutoUpdate, false);
  // -m names the model: no routing side call to a flash-lite model first.
  assert.deepEqual(launch.argv.slice(0, 3), ["gemini", "-m", "gemini-2.5-pro"]);
});

test("Crush says what is missing: its package, or the binary it downloads from GitHub", () => {
  const why = crushUnavailable();
  if (why !== null)
    assert.match(why, /npm install|GitHub releases; run node .*install\.js where github\.com is reachable/);
});
