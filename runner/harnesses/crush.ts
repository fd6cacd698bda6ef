// Crush (`@charmland/crush`, chat completions): a crush.json (CRUSH_GLOBAL_CONFIG's folder) with one `openai-compat`
// provider at the rollout's base URL as its large and small model; provider catalogue updates (Catwalk) and usage
// metrics off. Its npm package holds no binary: its postinstall (denied in package.json allowScripts) or its first run
// downloads one from GitHub releases, so it runs only where that download happened (docs/harnesses.md#crush).
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { openaiBase, PLACEHOLDER_KEY } from "./base-urls.ts";
import type { Harness, HarnessContext } from "./types.ts";

/** Where the Crush package keeps the binary it downloads, or null when the package is not installed. */
export function crushBinary(): string | null {
  try {
    const pkg = createRequire(import.meta.url).resolve("@charmland/crush/package.json");
    return join(dirname(pkg), "bin", "crush");
  } catch {
    return null;
  }
}

export function crushUnavailable(): string | null {
  const binary = crushBinary();
  if (binary === null) return "Crush is not installed: npm install (@charmland/crush, a devDependency)";
  if (!existsSync(binary))
    return `Crush's binary is not downloaded (${binary}): its package fetches it from GitHub releases; run node ${join(dirname(dirname(binary)), "install.js")} where github.com is reachable`;
  return null;
}

function crushConfig(ctx: HarnessContext): string {
  const model = { model: ctx.model, provider: "rlgate" };
  return JSON.stringify(
    {
      $schema: "https://charm.land/crush.json",
      providers: {
        rlgate: {
          type: "openai-compat",
          base_url: openaiBase(ctx),
          api_key: PLACEHOLDER_KEY,
          models: [
            { id: ctx.model, name: ctx.model, context_window: 131_072, default_max_tokens: 4096, can_reason: true },
          ],
        },
      },
      models: { large: model, small: model },
      options: { disable_provider_auto_update: true, disable_metrics: true },
    },
    null,
    2,
  );
}

export const CRUSH: Harness = {
  name: "crush",
  bin: "crush",
  unavailable: crushUnavailable,
  fetchedSeparately: true,
  launch: (ctx) => ({
    // --yolo: no permission prompts; --quiet: no spinner on a terminal that is not one.
    argv: ["crush", "--yolo", "--cwd", ctx.workspace, "run", "--quiet", ctx.prompt],
    env: {
      CRUSH_GLOBAL_CONFIG: `${ctx.home}/.config/crush`,
      CRUSH_GLOBAL_DATA: `${ctx.home}/.local/share/crush`,
      CRUSH_DISABLE_PROVIDER_AUTO_UPDATE: "1",
      CRUSH_DISABLE_METRICS: "1",
      DO_NOT_TRACK: "1",
    },
    files: { ".config/crush/crush.json": crushConfig(ctx) },
  }),
  scripting: {
    shell: (command) => ({ name: "bash", arguments: { command } }),
    noSubAgent: "not scripted for Crush",
    noCompaction: "not scripted for Crush",
  },
};
