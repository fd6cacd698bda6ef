// How each harness CLI is run inside a sandbox: its command line, environment and config files, pointed at the
// gateway through the sandbox's bridge (http://127.0.0.1:PORT inside). The settings follow docs/harnesses.md (what
// each CLI reads, what it would otherwise send elsewhere); `--harness 'CMD … {prompt} …'` runs any other CLI.
import { openclawHarness } from "./openclaw.ts";

export interface HarnessContext {
  prompt: string;
  /** The gateway as the sandbox sees it, e.g. http://127.0.0.1:8700. */
  origin: string;
  rolloutId: string;
  /** The model name the upstream serves. */
  model: string;
  /** HOME inside the sandbox. */
  home: string;
}

export interface HarnessLaunch {
  argv: string[];
  env: Record<string, string>;
  /** Files to write under HOME before the sandbox starts (path relative to HOME → content). */
  files: Record<string, string>;
}

export interface Harness {
  name: string;
  launch(ctx: HarnessContext): HarnessLaunch;
  /** Why this harness cannot run on this installation (checked before any rollout), or null. */
  unavailable?(): string | null;
  /** The sandbox memory (--memory) it needs at least, where that is more than the default. */
  minMemoryBytes?: number;
}

const openaiBase = (ctx: HarnessContext) => `${ctx.origin}/r/${ctx.rolloutId}/v1`;
const anthropicBase = (ctx: HarnessContext) => `${ctx.origin}/r/${ctx.rolloutId}`;
// The gateway needs no credentials on a path-scoped URL (the runner's bridge adds the rollout key when it has one).
const PLACEHOLDER_KEY = "sk-rlgate-sandbox";

const QWEN_SETTINGS = {
  general: { enableAutoUpdate: false },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  ide: { enabled: false },
  memory: { enableManagedAutoMemory: false, enableManagedAutoDream: false, enableAutoSkill: false },
  model: { skipNextSpeakerCheck: true, skipLoopDetection: true },
  security: { folderTrust: { enabled: false }, auth: { selectedType: "openai" } },
};

const qwen: Harness = {
  name: "qwen-code",
  launch: (ctx) => ({
    argv: ["qwen", "-p", ctx.prompt, "--yolo", "--auth-type", "openai"],
    env: {
      OPENAI_BASE_URL: openaiBase(ctx),
      OPENAI_API_KEY: PLACEHOLDER_KEY,
      OPENAI_MODEL: ctx.model,
      QWEN_CODE_DISABLE_PRECONNECT: "1",
      QWEN_DISABLE_AUTO_TITLE: "1",
      QWEN_CODE_SYSTEM_SETTINGS_PATH: `${ctx.home}/no-system-settings.json`,
      QWEN_CODE_SYSTEM_DEFAULTS_PATH: `${ctx.home}/no-system-defaults.json`,
    },
    files: { ".qwen/settings.json": JSON.stringify(QWEN_SETTINGS, null, 2) },
  }),
};

const claude: Harness = {
  name: "claude-code",
  launch: (ctx) => ({
    argv: ["claude", "-p", ctx.prompt, "--dangerously-skip-permissions", "--model", ctx.model],
    env: {
      ANTHROPIC_BASE_URL: anthropicBase(ctx),
      ANTHROPIC_API_KEY: PLACEHOLDER_KEY,
      IS_SANDBOX: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_TELEMETRY: "1",
    },
    files: {},
  }),
};

const codex: Harness = {
  name: "codex",
  launch: (ctx) => ({
    argv: ["codex", "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", ctx.prompt],
    env: { CODEX_HOME: `${ctx.home}/.codex`, OPENAI_API_KEY: PLACEHOLDER_KEY },
    files: {
      ".codex/config.toml": [
        `model = ${JSON.stringify(ctx.model)}`,
        `model_provider = "rlgate"`,
        "",
        "[model_providers.rlgate]",
        `name = "rlgate"`,
        `base_url = ${JSON.stringify(openaiBase(ctx))}`,
        `wire_api = "responses"`,
        `env_key = "OPENAI_API_KEY"`,
        "",
      ].join("\n"),
    },
  }),
};

const opencode: Harness = {
  name: "opencode",
  launch: (ctx) => ({
    argv: ["opencode", "run", "--model", `rlgate/${ctx.model}`, ctx.prompt],
    env: { OPENCODE_DISABLE_AUTOUPDATE: "1", OPENCODE_DISABLE_SHARE: "1", OPENAI_API_KEY: PLACEHOLDER_KEY },
    files: {
      ".config/opencode/opencode.json": JSON.stringify(
        {
          $schema: "https://opencode.ai/config.json",
          autoupdate: false,
          share: "disabled",
          provider: {
            rlgate: {
              npm: "@ai-sdk/openai-compatible",
              name: "rlgate",
              options: { baseURL: openaiBase(ctx), apiKey: PLACEHOLDER_KEY },
              models: { [ctx.model]: { name: ctx.model } },
            },
          },
        },
        null,
        2,
      ),
    },
  }),
};

const pi: Harness = {
  name: "pi",
  launch: (ctx) => ({
    argv: ["pi", "--provider", "rlgate", "--model", ctx.model, "--no-session", "-p", ctx.prompt],
    env: { PI_OFFLINE: "1", PI_TELEMETRY: "0", PI_SKIP_VERSION_CHECK: "1" },
    files: {
      ".pi/agent/models.json": JSON.stringify({
        providers: {
          rlgate: {
            baseUrl: openaiBase(ctx),
            api: "openai-completions",
            apiKey: PLACEHOLDER_KEY,
            models: [{ id: ctx.model, reasoning: true, contextWindow: 40000, maxTokens: 4000 }],
          },
        },
      }),
      ".pi/agent/settings.json": JSON.stringify({ enableInstallTelemetry: false }),
    },
  }),
};

export const HARNESS_PRESETS: Record<string, Harness> = {
  "qwen-code": qwen,
  qwen,
  "claude-code": claude,
  claude,
  codex,
  opencode,
  pi,
  // OpenClaw with each provider API it speaks (runner/openclaw.ts); chat completions unless named.
  openclaw: openclawHarness("openai-completions", "openclaw"),
  "openclaw-responses": openclawHarness("openai-responses", "openclaw-responses"),
  "openclaw-messages": openclawHarness("anthropic-messages", "openclaw-messages"),
};

/** Single-quotes a string for bash. */
export function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/**
 * A preset by name, or a template: a shell command with `{prompt}` (the prompt, shell-quoted), `{base_url}` (OpenAI
 * style), `{anthropic_base_url}`, `{model}` and `{rollout}` placeholders. The same URLs are in the environment as
 * RLGATE_BASE_URL, RLGATE_ANTHROPIC_BASE_URL, OPENAI_BASE_URL, ANTHROPIC_BASE_URL.
 */
export function resolveHarness(spec: string): Harness {
  const preset = HARNESS_PRESETS[spec];
  if (preset) return preset;
  if (!/\s/.test(spec) && !spec.includes("{")) {
    throw new Error(
      `unknown harness '${spec}': a preset (${Object.keys(HARNESS_PRESETS).join(", ")}) or a command template with {prompt}`,
    );
  }
  return {
    name: "custom",
    launch: (ctx) => {
      const command = spec
        .replaceAll("{prompt}", shellQuote(ctx.prompt))
        .replaceAll("{base_url}", shellQuote(openaiBase(ctx)))
        .replaceAll("{anthropic_base_url}", shellQuote(anthropicBase(ctx)))
        .replaceAll("{model}", shellQuote(ctx.model))
        .replaceAll("{rollout}", shellQuote(ctx.rolloutId));
      return {
        argv: ["bash", "-c", command],
        env: {
          OPENAI_BASE_URL: openaiBase(ctx),
          OPENAI_API_KEY: PLACEHOLDER_KEY,
          ANTHROPIC_BASE_URL: anthropicBase(ctx),
          ANTHROPIC_API_KEY: PLACEHOLDER_KEY,
        },
        files: {},
      };
    },
  };
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
