// A harness given as a shell command line (`rlgate run --harness 'CMD … {prompt}'`, `rlgate harness-check`): its
// placeholders are replaced with shell-quoted values and the base URLs are in the environment too.
import { anthropicBase, openaiBase, PLACEHOLDER_KEY } from "./base-urls.ts";
import type { Harness } from "./types.ts";

/** Single-quotes a string for bash. */
export function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** Whether `spec` reads as a command template rather than a preset's name. */
export const isTemplate = (spec: string): boolean => /\s/.test(spec) || spec.includes("{");

/**
 * `{prompt}` (the prompt), `{base_url}` (OpenAI style), `{anthropic_base_url}`, `{model}` and `{rollout}` are replaced;
 * OPENAI_BASE_URL, ANTHROPIC_BASE_URL and placeholder keys are set.
 */
export function templateHarness(spec: string, name = "custom"): Harness {
  return {
    name,
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
