// Claude Code (`@anthropic-ai/claude-code`, Anthropic Messages, streaming): ANTHROPIC_BASE_URL points it at the
// rollout; the non-essential-traffic switch also stops the title-generation call that would open every session.
import { anthropicBase, PLACEHOLDER_KEY } from "./base-urls.ts";
import type { Harness } from "./types.ts";

export const CLAUDE_CODE: Harness = {
  name: "claude-code",
  bin: "claude",
  ownModel: { name: "claude-sonnet-4-5", pattern: "claude-*" },
  launch: (ctx, options = {}) => ({
    argv: [
      "claude",
      ...(options.resume ? ["--continue"] : []),
      "-p",
      ctx.prompt,
      "--dangerously-skip-permissions",
      "--model",
      ctx.model,
    ],
    env: {
      ANTHROPIC_BASE_URL: anthropicBase(ctx),
      ANTHROPIC_API_KEY: PLACEHOLDER_KEY,
      CLAUDE_CONFIG_DIR: `${ctx.home}/.claude`,
      IS_SANDBOX: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_ERROR_REPORTING: "1",
    },
    files: {},
  }),
  scripting: {
    compaction: {
      command: "/compact",
      summaryRequest: "Your task is to create a detailed summary of the conversation so far",
    },
    shell: (command) => ({ name: "Bash", arguments: { command, description: "Run a command" } }),
    subAgent: (prompt) => ({
      name: "Agent",
      arguments: { description: "Delegated step", prompt, subagent_type: "general-purpose" },
    }),
  },
};
