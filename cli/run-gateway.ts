// The gateway `rlgate run` starts when it is given none: the built-in sim as its upstream, and a control token drawn
// here that only the runner holds. The sandboxes never see it (not in their environment, not in a file they can
// read), so the control API stays closed to an agent even if a path slipped past the bridge; with the token set the
// gateway also wants each harness call's rollout key, which the runner's bridge adds outside the sandbox.
import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { startGateway, type Gateway } from "../gateway/index.ts";
import type { PromptModeName } from "../gateway/prompts/index.ts";
import { loadScript, startSim, type SimServer } from "../sim/index.ts";
import { DEFAULT_SIM_MAX_MODEL_LEN, modelDirOptions, simFamily } from "./serve-command.ts";
import { builtInSimOptions, type BuiltInSimSettings } from "./serve-workers.ts";

export interface RunGatewayOptions {
  simScript?: string;
  /** The store; when not given, a new folder under .rlgate/runs named by the time, kept after the run. */
  data?: string;
  modelDir?: string;
  prompts: PromptModeName;
}

export interface RunGateway {
  url: string;
  /** The control token: for the runner's control client only. */
  token: string;
  /** Where the store is: kept after the run, for rlgate show, export and replay deliver --data. */
  dataDir: string;
  /** What it serves, for the one line `rlgate run` prints. */
  description: string;
  close(): Promise<void>;
}

export async function startRunGateway(o: RunGatewayOptions): Promise<RunGateway> {
  const simSettings: BuiltInSimSettings = {
    modelDir: o.modelDir,
    simPort: 0,
    upstreamFlavor: "vllm",
    simMaxModelLen: DEFAULT_SIM_MAX_MODEL_LEN,
  };
  let sim: SimServer | null = null;
  let gateway: Gateway | null = null;
  // Kept: the run's gateway is gone when the run ends, and its store is then the only place its rollouts are.
  const dataDir = resolve(o.data ?? defaultRunData());
  mkdirSync(dataDir, { recursive: true });
  const close = async () => {
    await gateway?.close();
    await sim?.close();
  };
  try {
    const family = simFamily(simSettings);
    sim = await startSim({
      ...builtInSimOptions(simSettings),
      script: o.simScript ? loadScript(resolve(o.simScript)) : undefined,
    });
    const token = randomBytes(24).toString("base64url");
    gateway = await startGateway({
      upstream: sim.url,
      port: 0,
      grpcPort: null,
      dataDir,
      modelMap: "claude-*=Qwen/Qwen3-8B,gpt-*=Qwen/Qwen3-8B",
      prompts: o.prompts,
      controlToken: token,
      ...modelDirOptions(o.modelDir),
    });
    return {
      url: gateway.url,
      token,
      dataDir,
      description: `the built-in sim (${family}${o.simScript ? `, script ${o.simScript}` : ""})`,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** .rlgate/runs/<UTC time>, beside serve's .rlgate/data: a new folder each run, sorted by when it ran. */
export function defaultRunData(now = new Date()): string {
  return join(".rlgate", "runs", now.toISOString().replace(/[:.]/g, "-"));
}
