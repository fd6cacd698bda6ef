// Gemini CLI (`@google/gemini-cli`, the Gemini API: generateContent / streamGenerateContent): GOOGLE_GEMINI_BASE_URL
// points its SDK at the rollout (it appends /v1beta/models/…), GEMINI_API_KEY is sent as x-goog-api-key, and
// ~/.gemini/settings.json selects API-key auth and turns off what would reach Google or make side calls of its own:
// update checks, usage statistics, telemetry, IDE discovery, the next-speaker and loop-detection checks, folder trust
// (GEMINI_CLI_TRUST_WORKSPACE answers its trust prompt). A model named with -m skips its router's flash-lite side call.
import { anthropicBase, PLACEHOLDER_KEY } from "./base-urls.ts";
import type { Harness } from "./types.ts";

export const GEMINI_SETTINGS = {
  general: { enableAutoUpdate: false, enableAutoUpdateNotification: false, checkpointing: { enabled: false } },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
  ide: { enabled: false },
  model: { skipNextSpeakerCheck: true, disableLoopDetection: true },
  security: { folderTrust: { enabled: false }, auth: { selectedType: "gemini-api-key" } },
};

export const GEMINI: Harness = {
  name: "gemini",
  bin: "gemini",
  ownModel: { name: "gemini-2.5-pro", pattern: "gemini-*" },
  modelInPath:
    "Gemini CLI sends the model name in the path (/v1beta/models/NAME:streamGenerateContent), where rlgate's Gemini routes take a name without '/'",
  launch: (ctx, options = {}) => ({
    argv: ["gemini", ...(options.resume ? ["--resume", "latest"] : []), "-m", ctx.model, "-p", ctx.prompt, "--yolo"],
    env: {
      // The Gemini API's base is the rollout's unversioned base, as for Anthropic's.
      GOOGLE_GEMINI_BASE_URL: anthropicBase(ctx),
      GEMINI_API_KEY: PLACEHOLDER_KEY,
      GEMINI_CLI_TRUST_WORKSPACE: "true",
      // One process (it relaunches itself for a larger heap otherwise), no system-wide settings of the machine.
      GEMINI_CLI_NO_RELAUNCH: "true",
      GEMINI_CLI_SYSTEM_SETTINGS_PATH: `${ctx.home}/no-system-settings.json`,
      GEMINI_CLI_SYSTEM_DEFAULTS_PATH: `${ctx.home}/no-system-defaults.json`,
      GEMINI_TELEMETRY_ENABLED: "false",
    },
    files: { ".gemini/settings.json": JSON.stringify(GEMINI_SETTINGS, null, 2) },
  }),
  scripting: {
    shell: (command) => ({ name: "run_shell_command", arguments: { command, description: "Run a command" } }),
    noSubAgent: "not scripted for Gemini CLI",
    noCompaction: "not scripted for Gemini CLI",
  },
};
