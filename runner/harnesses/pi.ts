// pi coding agent (`@mariozechner/pi-coding-agent`) over one of its three provider APIs: ~/.pi/agent/models.json names
// the base URL and API of a provider `rlgate`; PI_OFFLINE turns off its update check and telemetry
// (test/e2e/PI_CODING_AGENT_NOTES.md).
import { anthropicBase, openaiBase, PLACEHOLDER_KEY } from "./base-urls.ts";
import type { Harness } from "./types.ts";

export type PiApi = "anthropic-messages" | "openai-responses" | "openai-completions";

/** Its prompt is some 850 tokens: a window that compacts once a tool's long output is in the history. */
const COMPACT_MODEL = { contextWindow: 3000, maxTokens: 1000 };
const COMPACTION = { enabled: true, reserveTokens: 1000, keepRecentTokens: 200 };

export function piHarness(api: PiApi, name: string): Harness {
  return {
    name,
    bin: "pi",
    launch: (ctx, options = {}) => ({
      // Sessions are kept under HOME, so a continued run finds the first one.
      argv: [
        "pi",
        "--provider",
        "rlgate",
        "--model",
        ctx.model,
        "--session-dir",
        `${ctx.home}/pi-sessions`,
        ...(options.resume ? ["--continue"] : []),
        "-p",
        ctx.prompt,
      ],
      env: { PI_OFFLINE: "1", PI_TELEMETRY: "0", PI_SKIP_VERSION_CHECK: "1" },
      files: {
        ".pi/agent/models.json": JSON.stringify(
          {
            providers: {
              rlgate: {
                baseUrl: api === "anthropic-messages" ? anthropicBase(ctx) : openaiBase(ctx),
                api,
                apiKey: PLACEHOLDER_KEY,
                models: [
                  {
                    id: ctx.model,
                    reasoning: true,
                    ...(options.compact ? COMPACT_MODEL : { contextWindow: 131_072, maxTokens: 4000 }),
                  },
                ],
              },
            },
          },
          null,
          2,
        ),
        ".pi/agent/settings.json": JSON.stringify({
          enableInstallTelemetry: false,
          ...(options.compact ? { compaction: COMPACTION } : {}),
        }),
      },
    }),
    scripting: {
      noSubAgent: "pi has no sub-agent tool",
      // No compaction command in -p mode: it compacts once a call's context passes contextWindow − reserveTokens, on
      // the next prompt. The history is then one long turn, which it cuts: the summarizer's request is that of a
      // turn's prefix (a history of several turns gets "Create a structured context checkpoint summary…" too).
      compaction: { summaryRequest: "Summarize the prefix to provide context" },
      shell: (command) => ({ name: "bash", arguments: { command } }),
    },
  };
}
