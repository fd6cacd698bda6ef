// Qwen Code (`@qwen-code/qwen-code`, chat completions): OPENAI_* variables point it at the rollout; its settings turn
// off everything that would reach the network or make side calls of its own (test/e2e/QWEN_CODE_NOTES.md: why each).
import { openaiBase, PLACEHOLDER_KEY } from "./base-urls.ts";
import type { Harness } from "./types.ts";

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
  bin: "qwen",
  launch: (ctx, options = {}) => ({
    argv: ["qwen", ...(options.resume ? ["--continue"] : []), "-p", ctx.prompt, "--yolo", "--auth-type", "openai"],
    env: {
      OPENAI_BASE_URL: openaiBase(ctx),
      OPENAI_API_KEY: PLACEHOLDER_KEY,
      OPENAI_MODEL: ctx.model,
      QWEN_CODE_DISABLE_PRECONNECT: "1",
      QWEN_DISABLE_AUTO_TITLE: "1",
      // No system-wide settings of the machine it runs on (paths that do not exist).
      QWEN_CODE_SYSTEM_SETTINGS_PATH: `${ctx.home}/no-system-settings.json`,
      QWEN_CODE_SYSTEM_DEFAULTS_PATH: `${ctx.home}/no-system-defaults.json`,
    },
    files: { ".qwen/settings.json": JSON.stringify(QWEN_SETTINGS, null, 2) },
  }),
  scripting: {
    cannedAssistantTurns: 1,
    // `/compress` runs in -p mode too; its request ends asking for a snapshot: "…generate the <state_snapshot>" under
    // a summarizer's system prompt (0.15), "…produce the <state_snapshot> XML." appended to the agent's history
    // (0.2x). A sim that answers either without one makes the CLI keep its history: no compaction to see.
    compaction: { command: "/compress", summaryRequest: "the <state_snapshot>" },
    shell: (command) => ({ name: "run_shell_command", arguments: { command, description: "Run a command" } }),
    subAgent: (prompt) => ({
      name: "agent",
      arguments: { description: "Delegated step", prompt, subagent_type: "general-purpose" },
    }),
  },
};
