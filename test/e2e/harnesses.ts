// The registry's harnesses (runner/harnesses.ts) as the e2e tests, `npm run harness-matrix` and `rlgate harness-check`
// run them outside a sandbox: the launch written into a run's temp dirs, the CLI found in node_modules/.bin, the model
// each asks for. Nothing about a harness is defined here: one definition serves `rlgate run` and the tests.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { HARNESSES, type Harness, type LaunchOptions } from "../../runner/harnesses.ts";
import { launchInDirs, type Launch } from "../../runner/harness-local.ts";
import type { CreatedRollout } from "../helpers.ts";
import { requireInCi } from "../require-in-ci.ts";
import { BIN, type HarnessDirs } from "./harness-run.ts";

export { HARNESSES, type Harness, type Launch };
export const SERVED_MODEL = "Qwen/Qwen3-8B";

export const byName = (name: string): Harness => {
  const h = HARNESSES.find((x) => x.name === name);
  if (!h) throw new Error(`no harness ${name} in runner/harnesses.ts`);
  return h;
};

/** Why the harness's CLI cannot run here (not installed, or its own reason), or null. */
export function whyAbsent(h: Harness): string | null {
  if (h.bin && !existsSync(join(BIN, h.bin))) return `${h.bin} is not in node_modules/.bin; run npm install`;
  return h.unavailable?.() ?? null;
}

export const isInstalled = (h: Harness): boolean => whyAbsent(h) === null;

/**
 * A test's `skip` for a suite that runs `h`: its reason here, a failure in CI (npm install puts every CLI there), but
 * for a CLI whose binary npm install does not fetch.
 */
export function cliSkip(h: Harness): string | false {
  const why = whyAbsent(h);
  if (why !== null && h.fetchedSeparately) return why;
  return requireInCi(`the ${h.name} CLI (npm install)`, why);
}

/** The model the tests ask for: the one it is built for (mapped by the gateway to the served one), else the served. */
export const testModel = (h: Harness): string => h.ownModel?.name ?? SERVED_MODEL;
/** The gateway's `--model-map` for it. */
export const testModelMap = (h: Harness): string | undefined =>
  h.ownModel ? `${h.ownModel.pattern}=${SERVED_MODEL}` : undefined;

/** Writes the harness's files under `dirs.home` and returns how to run `prompt` in `dirs.workspace`. */
export function launch(
  h: Harness,
  dirs: HarnessDirs,
  rollout: CreatedRollout,
  prompt: string,
  options: LaunchOptions & { model?: string } = {},
): Launch {
  return launchInDirs(h, {
    dirs,
    origin: new URL(rollout.base_urls.openai).origin,
    rolloutId: rollout.id,
    model: options.model ?? testModel(h),
    prompt,
    options,
  });
}
