// Codex (`@openai/codex`, OpenAI Responses): a config.toml in CODEX_HOME with one provider at the rollout's base URL,
// and the switches that keep it off the network (update check, analytics, feedback).
import { openaiBase, PLACEHOLDER_KEY } from "./base-urls.ts";
import type { Harness } from "./types.ts";

/** Codex's config: its defaults plus the one provider entry, and the switches that keep it off the network. */
export function codexConfig(baseUrl: string, model: string, autoCompactTokens?: number): string {
  return [
    `model = ${JSON.stringify(model)}`,
    ...(autoCompactTokens ? [`model_auto_compact_token_limit = ${autoCompactTokens}`] : []),
    `model_provider = "rlgate"`,
    `check_for_update_on_startup = false`,
    "",
    "[model_providers.rlgate]",
    `name = "rlgate"`,
    `base_url = ${JSON.stringify(baseUrl)}`,
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

/** Its prompt is some 8,700 tokens: a limit a little above compacts a few calls in. */
const CODEX_AUTO_COMPACT_TOKENS = 9000;

export const CODEX: Harness = {
  name: "codex",
  bin: "codex",
  ownModel: { name: "gpt-5.1-codex", pattern: "gpt-*" },
  launch: (ctx, options = {}) => ({
    argv: [
      "codex",
      "exec",
      ...(options.resume ? ["resume", "--last"] : []),
      "--skip-git-repo-check",
      "--dangerously-bypass-approvals-and-sandbox",
      ctx.prompt,
    ],
    env: { CODEX_HOME: `${ctx.home}/.codex`, OPENAI_API_KEY: PLACEHOLDER_KEY, RUST_LOG: "error" },
    files: {
      ".codex/config.toml": codexConfig(
        openaiBase(ctx),
        ctx.model,
        options.compact ? CODEX_AUTO_COMPACT_TOKENS : undefined,
      ),
    },
  }),
  scripting: {
    shell: (command) => ({ name: "exec_command", arguments: { cmd: command } }),
    // Its multi-agent tools come as a namespace, flattened upstream as `{namespace}__{name}`.
    subAgent: (prompt) => ({ name: "multi_agent_v1__spawn_agent", arguments: { message: prompt } }),
    // No compaction command in `codex exec`: it compacts by itself past model_auto_compact_token_limit.
    compaction: { summaryRequest: "CONTEXT CHECKPOINT COMPACTION" },
  },
};
