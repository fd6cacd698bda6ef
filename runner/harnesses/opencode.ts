// OpenCode (`opencode-ai`, chat completions) and its fork Kilo Code (`@kilocode/cli`): one OpenAI-compatible provider
// at the rollout's base URL in the config file its *_CONFIG variable names, its state in the XDG folders under HOME,
// and the *_DISABLE_* switches that keep it off the network: models.dev catalogue, LSP downloads, plugin installs from
// npm, share links, the user's Claude Code config and skills (docs/harnesses.md).
import { openaiBase, PLACEHOLDER_KEY } from "./base-urls.ts";
import type { Harness, HarnessContext, HarnessScripting } from "./types.ts";

/**
 * The config: one OpenAI-compatible provider at `baseUrl` serving `model`; `limit` declares the model's context and
 * output budget (it compacts once a call's tokens reach context − output).
 */
export function opencodeConfig(
  baseUrl: string,
  model: string,
  limit?: { context: number; output: number },
  schema = "https://opencode.ai/config.json",
  extra: Record<string, unknown> = {},
): string {
  const provider = {
    npm: "@ai-sdk/openai-compatible",
    name: "rlgate",
    options: { baseURL: baseUrl, apiKey: PLACEHOLDER_KEY },
    models: { [model]: { name: model, ...(limit ? { limit } : {}) } },
  };
  return JSON.stringify(
    {
      $schema: schema,
      provider: { rlgate: provider },
      model: `rlgate/${model}`,
      autoupdate: false,
      share: "disabled",
      ...extra,
    },
    null,
    2,
  );
}

/** OpenCode asks for a title with this text in its opening user messages (a scripted thread answers it). */
export const OPENCODE_TITLE_THREAD = "Generate a title for this conversation";

/** Its prompt is some 7,300 tokens: a budget a little above compacts once a tool's long output is in the history. */
const COMPACT_LIMIT = { context: 9400, output: 1000 };

const SWITCHES = [
  "DISABLE_AUTOUPDATE",
  "DISABLE_MODELS_FETCH",
  "DISABLE_LSP_DOWNLOAD",
  "DISABLE_DEFAULT_PLUGINS",
  "DISABLE_SHARE",
  "DISABLE_CLAUDE_CODE",
  "DISABLE_EXTERNAL_SKILLS",
];

const xdg = (ctx: HarnessContext) => ({
  XDG_CONFIG_HOME: `${ctx.home}/.config`,
  XDG_DATA_HOME: `${ctx.home}/.local/share`,
  XDG_CACHE_HOME: `${ctx.home}/.cache`,
  XDG_STATE_HOME: `${ctx.home}/.local/state`,
});

interface Flavour {
  name: string;
  bin: string;
  /** Its variables' prefix (OPENCODE_, KILO_) and config folder and file under ~/.config. */
  prefix: string;
  configFile: string;
  schema: string;
  /** Switches of its own beyond the shared ones, in its environment and its config. */
  env?: Record<string, string>;
  config?: Record<string, unknown>;
  /** Text of its title request (a side call a scripted thread answers). */
  titleThread: string;
  /** Why its compaction is not scripted, where OpenCode's script does not fit it. */
  noCompaction?: string;
}

function opencodeFamily(f: Flavour): Harness {
  const scripting: HarnessScripting = {
    subAgent: (prompt) => ({
      name: "task",
      arguments: { description: "Delegated step", prompt, subagent_type: "general" },
    }),
    // No compaction command in `run`: it compacts by itself once a call's tokens reach the model's context limit
    // less its output limit; the summarizer runs under "You are a context summarization agent" with this request.
    ...(f.noCompaction ? { noCompaction: f.noCompaction } : { compaction: { summaryRequest: "anchored summary" } }),
    sideThreads: [{ thread: f.titleThread, reasoning: "A short title.", content: "Scripted file task" }],
    shell: (command) => ({ name: "bash", arguments: { command, description: "Run a command" } }),
  };
  return {
    name: f.name,
    bin: f.bin,
    launch: (ctx, options = {}) => {
      const configFile = `${ctx.home}/.config/${f.configFile}`;
      return {
        argv: [f.bin, "run", ...(options.resume ? ["--continue"] : []), ctx.prompt],
        env: {
          ...xdg(ctx),
          [`${f.prefix}CONFIG`]: configFile,
          ...Object.fromEntries(SWITCHES.map((s) => [`${f.prefix}${s}`, "1"])),
          ...f.env,
        },
        files: {
          [`.config/${f.configFile}`]: opencodeConfig(
            openaiBase(ctx),
            ctx.model,
            options.compact ? COMPACT_LIMIT : undefined,
            f.schema,
            f.config,
          ),
        },
      };
    },
    scripting,
  };
}

export const OPENCODE = opencodeFamily({
  name: "opencode",
  bin: "opencode",
  prefix: "OPENCODE_",
  configFile: "opencode/opencode.json",
  schema: "https://opencode.ai/config.json",
  titleThread: OPENCODE_TITLE_THREAD,
});

export const KILO = opencodeFamily({
  name: "kilo",
  bin: "kilo",
  prefix: "KILO_",
  configFile: "kilo/kilo.json",
  schema: "https://app.kilo.ai/config.json",
  // Kilo's own: session uploads to its cloud and telemetry (PostHog); only the rlgate provider loaded (without it, it
  // looks up api.kilo.ai for its own hosted provider).
  env: { KILO_DISABLE_SESSION_INGEST: "1", KILO_TELEMETRY_LEVEL: "off" },
  config: { enabled_providers: ["rlgate"] },
  noCompaction:
    "not scripted for Kilo: under OpenCode's low context budget it compacts after its first tool call, its summarizer asking 'Here is the conversation so far'",
  titleThread: OPENCODE_TITLE_THREAD,
});
