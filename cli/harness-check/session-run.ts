// One scripted session of one harness: the simulated vLLM playing the session's script, an `rlgate serve` in front of
// it, a rollout, the harness run on each of the session's prompts in a clean temp workspace, then the rollout
// finished and its trajectories summarized as a table row. The shell commands really run: the task is done when the
// workspace's all.txt holds what the script wrote.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Harness } from "../../runner/harnesses.ts";
import { harnessDirs, launchInDirs, runCli, type CliRun } from "../../runner/harness-local.ts";
import { startSim, type ScriptTurn, type SimServer } from "../../sim/index.ts";
import type { CallRecord } from "../../store/records.ts";
import type { ToolParserName } from "../../tokenizer/output-parser.ts";
import type { ReasoningField } from "../../tokenizer/reasoning-field.ts";
import { fromSnakeCase } from "../../util/json-case.ts";
import { summarize, type Reconstruction, type Row } from "./report.ts";
import { EXPECTED, type SessionPlan } from "./sessions.ts";
import { startServe, type ServeProcess } from "./serve-process.ts";

export const SERVED_MODEL = "Qwen/Qwen3-8B";

/** The model family the sim answers in (the matrix's `--family`); the default is the built-in Qwen3. */
export interface SessionFamily {
  toolCallParser?: ToolParserName;
  /** A model directory for `serve --model-dir` (removed after the session); null: the built-in Qwen3. */
  modelDir(): string | null;
  script(turns: ScriptTurn[]): ScriptTurn[];
}

export const QWEN3_FAMILY: SessionFamily = { modelDir: () => null, script: (turns) => turns };

export interface SessionSettings {
  serveArgs: string[];
  timeoutMs: number;
  family?: SessionFamily;
  reasoningField?: ReasoningField;
  /** The model the harness asks for, and the `--model-map` that sends it to the sim's. */
  model: string;
  modelMap?: string;
  /** Write the session's call records to this folder (`<harness>-<session>.json`). */
  saveDir?: string;
  /** Print the tail of each run's output. */
  verbose?: boolean;
  /** Keep the gateway's store and say how to read it. */
  keepStore?: boolean;
}

/** A session's table row, and what it was made from. */
export interface SessionResult {
  row: Row;
  calls: CallRecord[];
  reconstruction: Reconstruction | null;
}

async function api(url: string, init?: RequestInit): Promise<unknown> {
  const res = await fetch(url, init);
  const text = await res.text();
  if (!res.ok) throw new Error(`${init?.method ?? "GET"} ${url}: ${res.status} ${text}`);
  return JSON.parse(text);
}

const post = (url: string, body: unknown) =>
  api(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

/** Finishes the rollout with `reward` and reads its trajectories. */
export async function finishAndReconstruct(gatewayUrl: string, rolloutId: string, reward = 1): Promise<Reconstruction> {
  await post(`${gatewayUrl}/api/rollouts/${rolloutId}/finish`, { reward });
  return fromSnakeCase<Reconstruction>(await api(`${gatewayUrl}/api/rollouts/${rolloutId}/trajectories`));
}

function outcomeOf(run: CliRun, workspace: string): string {
  if (run.timedOut) return "timeout";
  if (run.code !== 0) return `exit ${run.code}`;
  let written: string;
  try {
    written = readFileSync(join(workspace, "all.txt"), "utf8");
  } catch {
    written = "(none)";
  }
  return written === EXPECTED ? "ok" : `all.txt=${JSON.stringify(written)}`;
}

export async function runSession(
  h: Harness,
  session: string,
  plan: SessionPlan,
  s: SessionSettings,
): Promise<SessionResult> {
  const family = s.family ?? QWEN3_FAMILY;
  let sim: SimServer | null = null;
  let serve: ServeProcess | null = null;
  let modelDir: string | null = null;
  const dataDir = mkdtempSync(join(tmpdir(), "rlgate-check-store-"));
  const dirs = harnessDirs("check");
  try {
    sim = await startSim({
      port: 0,
      script: family.script(plan.script),
      maxModelLen: 131_072,
      ...(family.toolCallParser ? { toolCallParser: family.toolCallParser } : {}),
      ...(s.reasoningField ? { reasoningField: s.reasoningField } : {}),
    });
    modelDir = family.modelDir();
    serve = await startServe([
      ...["--upstream", sim.url, "--port", "0", "--grpc-port", "0", "--data", dataDir],
      ...(s.modelMap ? ["--model-map", s.modelMap] : []),
      ...(modelDir ? ["--model-dir", modelDir] : []),
      ...s.serveArgs,
    ]);
    const rollout = (await post(`${serve.url}/api/rollouts`, { harness: h.name, task: `check/${session}` })) as {
      id: string;
    };
    // The ids decode in the family's markup only with its model directory (kept with the store).
    if (s.keepStore)
      process.stderr.write(
        `\n  store kept: rlgate show --data ${dataDir}${modelDir ? ` --model-dir ${modelDir}` : ""} ${rollout.id}\n`,
      );
    let run: CliRun | null = null;
    for (const [i, prompt] of plan.prompts.entries()) {
      const { command, args, env } = launchInDirs(h, {
        dirs,
        origin: new URL(serve.url).origin,
        rolloutId: rollout.id,
        model: s.model,
        prompt,
        options: { resume: i > 0, compact: plan.compact },
      });
      run = await runCli(command, args, { cwd: dirs.workspace, env, timeoutMs: s.timeoutMs });
      if (s.verbose)
        process.stderr.write(`\n  $ ${prompt}\n  ${(run.stdout + run.stderr).slice(-800).replaceAll("\n", "\n  ")}\n`);
      if (run.timedOut || run.code !== 0) break;
    }
    if (run === null) throw new Error("a session without prompts");
    const calls = fromSnakeCase<{ calls: CallRecord[] }>(
      await api(`${serve.url}/api/rollouts/${rollout.id}/calls`),
    ).calls.sort((a, b) => a.seq - b.seq);
    const outcome = outcomeOf(run, dirs.workspace);
    if (outcome !== "ok")
      process.stderr.write(`  ${h.name}: ${outcome}\n  ${run.stderr.slice(-1500).replaceAll("\n", "\n  ")}\n`);
    if (s.saveDir) {
      mkdirSync(s.saveDir, { recursive: true });
      writeFileSync(join(s.saveDir, `${h.name.replaceAll("/", "-")}-${session}.json`), JSON.stringify(calls));
    }
    const rec = calls.length ? await finishAndReconstruct(serve.url, rollout.id) : null;
    return { row: summarize(h.name, session, outcome, calls, rec), calls, reconstruction: rec };
  } finally {
    await serve?.stop();
    await sim?.close();
    if (!s.keepStore) rmSync(dataDir, { recursive: true, force: true });
    rmSync(dirs.dir, { recursive: true, force: true });
    if (modelDir && !s.keepStore) rmSync(modelDir, { recursive: true, force: true });
  }
}
