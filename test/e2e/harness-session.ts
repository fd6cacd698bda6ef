// One real harness CLI session against rlgate in front of the simulated vLLM: a stack, a rollout, a clean workspace,
// the bounded run and the calls it made, torn down whole (the CLI's process group included) by `close`.
import { rmSync } from "node:fs";
import type { GatewayOptions } from "../../gateway/index.ts";
import type { ScriptTurn } from "../../sim/index.ts";
import type { CallRecord } from "../../store/records.ts";
import { createRollout, rolloutCalls, startStack, type CreatedRollout, type Stack } from "../helpers.ts";
import { harnessDirs, killLiveRuns, runCli, type CliRun, type HarnessDirs } from "./harness-run.ts";
import { launch, testModelMap, type Harness } from "./harnesses.ts";

export interface HarnessSession {
  stack: Stack;
  rollout: CreatedRollout;
  dirs: HarnessDirs;
  run: CliRun;
  /** The rollout's calls in the order they were made. */
  calls: CallRecord[];
  close(): Promise<void>;
}

export interface HarnessSessionOptions {
  /** The sim's scripted turns. */
  script: ScriptTurn[];
  prompt: string;
  /** The rollout's task name; its harness is the harness's name. */
  task: string;
  timeoutMs: number;
  /** The model the harness asks for (default: the one it is built for, else the served model). */
  model?: string;
  gateway?: Partial<GatewayOptions>;
}

export async function runHarnessSession(harness: Harness, options: HarnessSessionOptions): Promise<HarnessSession> {
  const stack = await startStack({
    sim: { script: options.script, maxModelLen: 131_072 },
    gateway: { modelMap: testModelMap(harness), ...options.gateway },
  });
  const dirs = harnessDirs(options.task);
  const close = async () => {
    killLiveRuns();
    await stack.close();
    rmSync(dirs.dir, { recursive: true, force: true });
  };
  try {
    const rollout = await createRollout(stack.gateway.url, { task: options.task, harness: harness.name });
    const { command, args, env } = launch(harness, dirs, rollout, options.prompt, { model: options.model });
    const run = await runCli(command, args, { cwd: dirs.workspace, env, timeoutMs: options.timeoutMs });
    const calls = (await rolloutCalls(stack.gateway.url, rollout.id)).sort((a, b) => a.seq - b.seq);
    return { stack, rollout, dirs, run, calls, close };
  } catch (error) {
    await close();
    throw error;
  }
}
