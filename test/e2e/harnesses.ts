// How each real harness CLI is pointed at a rollout: the command, its arguments, its environment and the config files
// it reads — the one place the e2e tests and `npm run harness-matrix` take them from (docs/harnesses.md explains each
// setting). Every run is isolated in temp dirs and has each switch that keeps the CLI off the network turned on.
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ScriptToolCall, ScriptTurn } from "../../sim/index.ts";
import type { CreatedRollout } from "../helpers.ts";
import { OPENCLAW_APIS } from "../../runner/openclaw.ts";
import { baseEnv, ROOT, type HarnessDirs } from "./harness-run.ts";
import { openclawMatrixHarness } from "./openclaw-harness.ts";

export interface Launch {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
}

/** How a run differs from a fresh one-prompt session. */
export interface LaunchOptions {
  /** Continue the harness's most recent session in this workspace with the prompt (its continue/resume switch). */
  resume?: boolean;
  /** Set the harness's context budget so low that it compacts by itself (harnesses without a compaction command). */
  compact?: boolean;
}

export interface Harness {
  name: string;
  /** The CLI's entry point; the harness is skipped when it is absent. */
  cli: string;
  /** `--model-map` entry when the harness asks for its own model name. */
  modelMap?: string;
  /** Assistant messages the harness puts in its first request itself (Qwen Code's canned startup-context reply). */
  cannedAssistantTurns?: number;
  /** Scripted threads that answer the harness's side calls (OpenCode's title request). */
  sideThreads?: ScriptTurn[];
  /** The harness's sub-agent tool and how to call it with a prompt, where it has one rlgate tests. */
  subAgent?(prompt: string): ScriptToolCall;
  /**
   * How the harness compacts its context: the prompt that asks for it in a continued session (its slash command; none
   * when it compacts by itself past a context budget, which `LaunchOptions.compact` sets low), and text of its
   * summarization request that the sim answers with a summary. Absent: `noCompaction` says why.
   */
  compaction?: { command?: string; summaryRequest: string };
  noCompaction?: string;
  /** Why the harness has no sub-agent session in the matrix. */
  noSubAgent?: string;
  /** A call of the harness's shell tool running `command`. */
  shell(command: string): ScriptToolCall;
  /** Writes the config files into `dirs` and returns how to run `prompt`. */
  launch(
    dirs: HarnessDirs,
    rollout: CreatedRollout,
    prompt: string,
    servedModel: string,
    options?: LaunchOptions,
  ): Launch;
}

const modules = join(ROOT, "node_modules");
export const SERVED_MODEL = "Qwen/Qwen3-8B";

/** Qwen Code's settings with everything that could reach the network or make side calls off (QWEN_CODE_NOTES.md). */
export const QWEN_SETTINGS = {
  general: { enableAutoUpdate: false },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  ide: { enabled: false },
  memory: { enableManagedAutoMemory: false, enableManagedAutoDream: false, enableAutoSkill: false },
  model: { skipNextSpeakerCheck: true, skipLoopDetection: true },
  security: { folderTrust: { enabled: false }, auth: { selectedType: "openai" } },
};

export const QWEN_CODE: Harness = {
  name: "qwen-code",
  cli: join(modules, "@qwen-code", "qwen-code", "cli.js"),
  cannedAssistantTurns: 1,
  // `/compress` runs in -p mode too; its request ends asking for a snapshot: "…generate the <state_snapshot>" under a
  // summarizer's system prompt (0.15), "…produce the <state_snapshot> XML." appended to the agent's history (0.2x). A sim
  // that answers either without one makes the CLI keep its history: no compaction to see.
  compaction: { command: "/compress", summaryRequest: "the <state_snapshot>" },
  shell: (command) => ({ name: "run_shell_command", arguments: { command, description: "Run a command" } }),
  subAgent: (prompt) => ({
    name: "agent",
    arguments: { description: "Delegated step", prompt, subagent_type: "general-purpose" },
  }),
  launch(dirs, rollout, prompt, servedModel, options = {}) {
    mkdirSync(join(dirs.home, ".qwen"), { recursive: true });
    writeFileSync(join(dirs.home, ".qwen", "settings.json"), JSON.stringify(QWEN_SETTINGS, null, 2));
    const env = baseEnv(dirs, {
      QWEN_CODE_SYSTEM_SETTINGS_PATH: join(dirs.dir, "no-system-settings.json"),
      QWEN_CODE_SYSTEM_DEFAULTS_PATH: join(dirs.dir, "no-system-defaults.json"),
      QWEN_CODE_DISABLE_PRECONNECT: "1",
      QWEN_DISABLE_AUTO_TITLE: "1",
      OPENAI_BASE_URL: rollout.base_urls.openai,
      OPENAI_API_KEY: "sk-rlgate",
      OPENAI_MODEL: servedModel,
    });
    const resume = options.resume ? ["--continue"] : [];
    return {
      command: process.execPath,
      args: [this.cli, ...resume, "-p", prompt, "--yolo", "--auth-type", "openai"],
      env,
    };
  },
};

export const CLAUDE_CODE: Harness = {
  name: "claude-code",
  cli: join(modules, ".bin", "claude"),
  modelMap: `claude-*=${SERVED_MODEL}`,
  compaction: {
    command: "/compact",
    summaryRequest: "Your task is to create a detailed summary of the conversation so far",
  },
  shell: (command) => ({ name: "Bash", arguments: { command, description: "Run a command" } }),
  subAgent: (prompt) => ({
    name: "Agent",
    arguments: { description: "Delegated step", prompt, subagent_type: "general-purpose" },
  }),
  launch(dirs, rollout, prompt, _servedModel, options = {}) {
    // The non-essential-traffic switch also stops the title-generation call that would open every session.
    const env = baseEnv(dirs, {
      ANTHROPIC_BASE_URL: rollout.base_urls.anthropic,
      ANTHROPIC_API_KEY: "sk-ant-rlgate",
      CLAUDE_CONFIG_DIR: join(dirs.home, ".claude"),
      IS_SANDBOX: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_ERROR_REPORTING: "1",
    });
    return {
      command: this.cli,
      args: [
        ...(options.resume ? ["--continue"] : []),
        "-p",
        prompt,
        "--dangerously-skip-permissions",
        "--model",
        "claude-sonnet-4-5",
      ],
      env,
    };
  },
};

/** Codex's config: its defaults plus the one provider entry, and the switches that keep it off the network. */
export function codexConfig(baseUrl: string, model: string, autoCompactTokens?: number): string {
  return [
    `model = "${model}"`,
    ...(autoCompactTokens ? [`model_auto_compact_token_limit = ${autoCompactTokens}`] : []),
    `model_provider = "rlgate"`,
    `check_for_update_on_startup = false`,
    "",
    "[model_providers.rlgate]",
    `name = "rlgate"`,
    `base_url = "${baseUrl}"`,
    `wire_api = "responses"`,
    `env_key = "OPENAI_API_KEY"`,
    "",
    "[analytics]",
    "enabled = false",
    "",
    "[feedback]",
    "enabled = false",
    "",
  ].join("\n");
}

const CODEX_AUTO_COMPACT_TOKENS = 9000;

export const CODEX: Harness = {
  name: "codex",
  cli: join(modules, "@openai", "codex", "bin", "codex.js"),
  modelMap: `gpt-*=${SERVED_MODEL}`,
  shell: (command) => ({ name: "exec_command", arguments: { cmd: command } }),
  // Its multi-agent tools come as a namespace, flattened upstream as `{namespace}__{name}`.
  subAgent: (prompt) => ({ name: "multi_agent_v1__spawn_agent", arguments: { message: prompt } }),
  // No compaction command in `codex exec`: it compacts by itself past model_auto_compact_token_limit.
  compaction: { summaryRequest: "CONTEXT CHECKPOINT COMPACTION" },
  launch(dirs, rollout, prompt, _servedModel, options = {}) {
    const codexHome = join(dirs.home, ".codex");
    mkdirSync(codexHome, { recursive: true });
    // Its prompt is some 8,700 tokens: a limit a little above compacts a few calls in.
    const autoCompact = options.compact ? CODEX_AUTO_COMPACT_TOKENS : undefined;
    writeFileSync(join(codexHome, "config.toml"), codexConfig(rollout.base_urls.openai, "gpt-5.1-codex", autoCompact));
    const env = baseEnv(dirs, { CODEX_HOME: codexHome, OPENAI_API_KEY: "sk-rlgate", RUST_LOG: "error" });
    return {
      command: process.execPath,
      args: [
        this.cli,
        "exec",
        ...(options.resume ? ["resume", "--last"] : []),
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        prompt,
      ],
      env,
    };
  },
};

/**
 * OpenCode's config: one OpenAI-compatible provider at the rollout's base URL, serving the upstream's model; `limit`
 * declares the model's context and output budget (OpenCode compacts once a call's tokens reach context − output).
 */
export function opencodeConfig(baseUrl: string, model: string, limit?: { context: number; output: number }): string {
  const provider = {
    npm: "@ai-sdk/openai-compatible",
    name: "rlgate",
    options: { baseURL: baseUrl, apiKey: "sk-rlgate" },
    models: { [model]: { name: model, ...(limit ? { limit } : {}) } },
  };
  return JSON.stringify(
    {
      $schema: "https://opencode.ai/config.json",
      provider: { rlgate: provider },
      model: `rlgate/${model}`,
      autoupdate: false,
      share: "disabled",
    },
    null,
    2,
  );
}

/** OpenCode asks for a title with this text in its opening user messages (a scripted thread answers it). */
export const OPENCODE_TITLE_THREAD = "Generate a title for this conversation";

/** Its prompt is some 7,300 tokens: a budget a little above compacts once a tool's long output is in the history. */
const OPENCODE_COMPACT_LIMIT = { context: 9400, output: 1000 };

export const OPENCODE: Harness = {
  name: "opencode",
  cli: join(modules, ".bin", "opencode"),
  subAgent: (prompt) => ({
    name: "task",
    arguments: { description: "Delegated step", prompt, subagent_type: "general" },
  }),
  // No compaction command in `opencode run`: it compacts by itself once a call's tokens reach the model's context limit
  // less its output limit; the summarizer runs under "You are a context summarization agent" with this request.
  compaction: { summaryRequest: "anchored summary" },
  sideThreads: [{ thread: OPENCODE_TITLE_THREAD, reasoning: "A short title.", content: "Scripted file task" }],
  shell: (command) => ({ name: "bash", arguments: { command, description: "Run a command" } }),
  launch(dirs, rollout, prompt, servedModel, options = {}) {
    const configFile = join(dirs.dir, "opencode.json");
    writeFileSync(
      configFile,
      opencodeConfig(rollout.base_urls.openai, servedModel, options.compact ? OPENCODE_COMPACT_LIMIT : undefined),
    );
    const env = baseEnv(dirs, {
      XDG_CONFIG_HOME: join(dirs.home, ".config"),
      XDG_DATA_HOME: join(dirs.home, ".local", "share"),
      XDG_CACHE_HOME: join(dirs.home, ".cache"),
      XDG_STATE_HOME: join(dirs.home, ".local", "state"),
      OPENCODE_CONFIG: configFile,
      OPENCODE_DISABLE_AUTOUPDATE: "1",
      OPENCODE_DISABLE_MODELS_FETCH: "1",
      OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
      OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
      OPENCODE_DISABLE_SHARE: "1",
      OPENCODE_DISABLE_CLAUDE_CODE: "1",
      OPENCODE_DISABLE_EXTERNAL_SKILLS: "1",
    });
    return { command: this.cli, args: ["run", ...(options.resume ? ["--continue"] : []), prompt], env };
  },
};

/** pi's prompt is some 850 tokens: a window that compacts once a tool's long output is in the history. */
const PI_COMPACT_MODEL = { contextWindow: 3000, maxTokens: 1000 };
const PI_COMPACTION = { enabled: true, reserveTokens: 1000, keepRecentTokens: 200 };

/** pi over one of its three APIs (PI_CODING_AGENT_NOTES.md). */
export function piHarness(api: "anthropic-messages" | "openai-responses" | "openai-completions"): Harness {
  return {
    name: `pi/${api}`,
    noSubAgent: "pi has no sub-agent tool",
    // No compaction command in -p mode: it compacts once a call's context passes contextWindow − reserveTokens, on
    // the next prompt. The history is then one long turn, which it cuts: the summarizer's request is that of a turn's
    // prefix (a history of several turns gets "Create a structured context checkpoint summary…" too).
    compaction: { summaryRequest: "Summarize the prefix to provide context" },
    cli: join(modules, "@mariozechner", "pi-coding-agent", "dist", "cli.js"),
    modelMap: `pi-*=${SERVED_MODEL}`,
    shell: (command) => ({ name: "bash", arguments: { command } }),
    launch(dirs, rollout, prompt, _servedModel, options = {}) {
      const agentDir = join(dirs.home, ".pi", "agent");
      mkdirSync(agentDir, { recursive: true });
      const baseUrl = api === "anthropic-messages" ? rollout.base_urls.anthropic : rollout.base_urls.openai;
      const models = {
        providers: {
          rlgate: {
            baseUrl,
            api,
            apiKey: "sk-rlgate",
            models: [
              {
                id: "pi-model",
                reasoning: true,
                ...(options.compact ? PI_COMPACT_MODEL : { contextWindow: 131_072, maxTokens: 4000 }),
              },
            ],
          },
        },
      };
      writeFileSync(join(agentDir, "models.json"), JSON.stringify(models, null, 2));
      const compaction = options.compact ? { compaction: PI_COMPACTION } : {};
      writeFileSync(join(agentDir, "settings.json"), JSON.stringify({ enableInstallTelemetry: false, ...compaction }));
      const env = baseEnv(dirs, { PI_OFFLINE: "1", PI_TELEMETRY: "0", PI_SKIP_VERSION_CHECK: "1" });
      return {
        command: process.execPath,
        // Sessions are kept in the run's own directory, so a continued run finds the first one.
        args: [
          this.cli,
          "--provider",
          "rlgate",
          "--model",
          "pi-model",
          "--session-dir",
          join(dirs.home, "pi-sessions"),
          ...(options.resume ? ["--continue"] : []),
          "-p",
          prompt,
        ],
        env,
      };
    },
  };
}

export const HARNESSES: Harness[] = [
  QWEN_CODE,
  CLAUDE_CODE,
  CODEX,
  OPENCODE,
  piHarness("anthropic-messages"),
  piHarness("openai-responses"),
  piHarness("openai-completions"),
  ...OPENCLAW_APIS.map(openclawMatrixHarness),
];

export function isInstalled(harness: Harness): boolean {
  return existsSync(harness.cli);
}
