// OpenClaw in `npm run harness-matrix` (test/e2e/harnesses.ts lists it), one entry per provider API: the launch of
// runner/openclaw.ts (its config, its environment, its Node) in the matrix's temp dirs instead of a sandbox.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  OPENCLAW_ENV,
  OPENCLAW_HOME,
  openclawConfig,
  openclawRuntime,
  type OpenclawApi,
} from "../../runner/openclaw.ts";
import { baseEnv } from "./harness-run.ts";
import type { Harness } from "./harnesses.ts";

export function openclawMatrixHarness(api: OpenclawApi): Harness {
  const runtime = openclawRuntime();
  return {
    name: `openclaw/${api}`,
    // Absent (the matrix lists it as not installed) when npm install did not put OpenClaw and its Node there.
    cli: "error" in runtime ? join(OPENCLAW_HOME, "missing") : runtime.entry,
    noSubAgent: "not scripted for OpenClaw",
    noCompaction: "not scripted for OpenClaw",
    shell: (command) => ({ name: "exec", arguments: { command } }),
    launch(dirs, rollout, prompt, servedModel) {
      if ("error" in runtime) throw new Error(runtime.error);
      const ctx = {
        prompt,
        origin: new URL(rollout.base_urls.openai).origin,
        rolloutId: rollout.id,
        model: servedModel,
        home: dirs.home,
      };
      mkdirSync(join(dirs.home, ".openclaw"), { recursive: true });
      writeFileSync(
        join(dirs.home, ".openclaw", "openclaw.json"),
        JSON.stringify(openclawConfig(ctx, api, dirs.workspace), null, 2),
      );
      return {
        command: runtime.node,
        args: [runtime.entry, "agent", "--local", "--message", prompt, "--json"],
        env: baseEnv(dirs, { ...OPENCLAW_ENV }),
      };
    },
  };
}
