// The one registry of harnesses: each CLI rlgate knows (runner/harnesses/*.ts: its command line, environment, config
// files, offline switches and what a scripted session must know of it), by preset name. `rlgate run --harness NAME`
// runs a preset in sandboxes; the e2e tests, `npm run harness-matrix` and `rlgate harness-check` run the same
// definitions in temp dirs. `--harness 'CMD … {prompt} …'` runs any other CLI (runner/harnesses/template.ts).
import { CLAUDE_CODE } from "./harnesses/claude-code.ts";
import { CODEX } from "./harnesses/codex.ts";
import { CRUSH } from "./harnesses/crush.ts";
import { GEMINI } from "./harnesses/gemini.ts";
import { KILO, OPENCODE } from "./harnesses/opencode.ts";
import { piHarness } from "./harnesses/pi.ts";
import { QWEN_CODE } from "./harnesses/qwen-code.ts";
import { anthropicBase, openaiBase } from "./harnesses/base-urls.ts";
import { isTemplate, templateHarness } from "./harnesses/template.ts";
import type { Harness, HarnessContext } from "./harnesses/types.ts";
import { openclawHarness } from "./openclaw.ts";

export type {
  Harness,
  HarnessContext,
  HarnessLaunch,
  HarnessScripting,
  LaunchOptions,
  ScriptedToolCall,
} from "./harnesses/types.ts";
export { shellQuote } from "./harnesses/template.ts";

/** Every built-in harness once, in the order tables list them. */
export const HARNESSES: readonly Harness[] = [
  QWEN_CODE,
  CLAUDE_CODE,
  CODEX,
  OPENCODE,
  KILO,
  CRUSH,
  GEMINI,
  // pi and OpenClaw with each provider API they speak (chat completions unless named).
  piHarness("openai-completions", "pi"),
  piHarness("openai-responses", "pi-responses"),
  piHarness("anthropic-messages", "pi-messages"),
  openclawHarness("openai-completions", "openclaw"),
  openclawHarness("openai-responses", "openclaw-responses"),
  openclawHarness("anthropic-messages", "openclaw-messages"),
];

/** Presets by name, with the short names users type. */
export const HARNESS_PRESETS: Readonly<Record<string, Harness>> = {
  ...Object.fromEntries(HARNESSES.map((h) => [h.name, h])),
  qwen: QWEN_CODE,
  claude: CLAUDE_CODE,
  "kilo-code": KILO,
};

/** A preset by name, or a command template (a shell command with `{prompt}` and the other placeholders). */
export function resolveHarness(spec: string): Harness {
  const preset = HARNESS_PRESETS[spec];
  if (preset) return preset;
  if (!isTemplate(spec)) {
    throw new Error(
      `unknown harness '${spec}': a preset (${Object.keys(HARNESS_PRESETS).join(", ")}) or a command template with {prompt}`,
    );
  }
  return templateHarness(spec);
}

/** Variables every harness gets, preset or template. */
export function commonEnv(ctx: HarnessContext): Record<string, string> {
  return {
    RLGATE_BASE_URL: openaiBase(ctx),
    RLGATE_ANTHROPIC_BASE_URL: anthropicBase(ctx),
    RLGATE_ROLLOUT_ID: ctx.rolloutId,
    RLGATE_MODEL: ctx.model,
  };
}
