// What the `rlgate run` end-to-end tests share: why a suite skips here (a harness not installed, or sandboxes that
// cannot start on this machine), and a failed rollout's result with the stage logs the runner kept on the rollout.
import { existsSync, rmSync } from "node:fs";
import type { RolloutResult } from "../../runner/rollout.ts";
import { tempDir } from "../helpers.ts";
import { bwrapForTests, requireInCi } from "../require-in-ci.ts";

/** The skip reason of a suite that runs `harness` (its entry point at `entry`) in sandboxes, or false. */
export function sandboxSkip(harness: string, entry: string): string | false {
  // The CLIs are devDependencies: absent in CI, npm install failed.
  if (!existsSync(entry))
    return requireInCi(`the ${harness} CLI (npm install)`, `${harness} binary absent; run npm install`);
  const scratch = tempDir("run-e2e-probe");
  const unavailable = bwrapForTests(scratch);
  rmSync(scratch, { recursive: true, force: true });
  return unavailable ? `sandboxes cannot start here: ${unavailable}` : false;
}

/** A rollout's result with the runner's stage logs (kept in its metadata), for assertion messages. */
export async function rolloutDiagnosis(gatewayUrl: string, r: RolloutResult): Promise<string> {
  const meta = ((await (await fetch(`${gatewayUrl}/api/rollouts/${r.rolloutId}`)).json()) as any).metadata;
  return JSON.stringify({ ...r, logs: meta?.runner?.logs }, null, 1).slice(-4000);
}
