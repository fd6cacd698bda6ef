// `npm run harness-matrix [-- options] [serve options…]`: every installed harness CLI runs a scripted 8-turn session
// against the simulated vLLM through an `rlgate serve` gateway (started with the serve options given here, passed
// through as they are: e.g. `--prompts tokens`, `--no-repair-history`), and the table says what its rollout looks like
// as trajectories: how many per segment kind, the breaks by kind, the amplification (trajectory tokens ÷ unique
// tokens) and trained ÷ sampled tokens, read from GET /api/rollouts/{id}/trajectories.
// The session: text before a tool call, parallel tool calls (two at once, twice), a turn without thinking, eight
// model turns; the shell commands really run in a temp workspace and build all.txt = "12345" (checked).
// `--sessions` adds more (docs/harnesses.md): `sub-agent` (the harness's sub-agent tool, Claude Code's Agent or
// Codex's multi_agent_v1.spawn_agent, starts a sub-agent that runs a step of its own; `--sub-agent` is the same),
// `long` (24 model calls), `irregular` (tool calls that do not follow the schema to the letter), `continued` (three
// prompts, the later ones through the CLI's continue switch) and `compaction` (work, the harness's compaction, more
// work). A harness that cannot run a session is listed with why.
// `--save-calls DIR` keeps each session's call records: the source of trajectory/golden-cli.test.ts's fixtures.
// `--family qwen3-coder` (or `llama3`) runs the sessions on that family's chat format: the sim answers in its tool-call
// syntax (`--tool-call-parser qwen3_coder` / `llama3_json`, its template) and the gateway is given a model directory of
// that family (matrix-families.ts).
// `--reasoning-field reasoning_content` (a serve option) makes the sim answer as vLLM <= 0.16 too (default: the
// current field, `reasoning`).
import { Command } from "commander";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startSim, type ScriptToolCall, type ScriptTurn, type SimServer } from "../sim/index.ts";
import { familySetup, MATRIX_FAMILIES, type MatrixFamily } from "./matrix-families.ts";
import { REASONING_FIELDS, type ReasoningField } from "../tokenizer/reasoning-field.ts";
import type { CallRecord } from "../store/records.ts";
import { createRollout, rolloutCalls, spawnCli, tempDir, type CliProcess } from "../test/helpers.ts";
import {
  finishAndReconstruct,
  harnessDirs,
  killLiveRuns,
  runCli,
  type CliRun,
  type Reconstruction,
} from "../test/e2e/harness-run.ts";
import { HARNESSES, isInstalled, SERVED_MODEL, type Harness } from "../test/e2e/harnesses.ts";

const EXPECTED = "12345";

/** serve's `--reasoning-field` (the vLLM version answered as) applies to the matrix's own sim too. */
function reasoningFieldOf(serveArgs: string[]): { reasoningField?: ReasoningField } {
  const at = serveArgs.findIndex((a) => a === "--reasoning-field" || a.startsWith("--reasoning-field="));
  if (at < 0) return {};
  const value = serveArgs[at]!.includes("=") ? serveArgs[at]!.split("=")[1] : serveArgs[at + 1];
  return (REASONING_FIELDS as readonly unknown[]).includes(value) ? { reasoningField: value as ReasoningField } : {};
}
const SUBTASK = "SUBTASK: write sub into sub.txt with the shell.";

/** The 8-turn main session, in the harness's own tool names. */
function mainSession(h: Harness): ScriptTurn[] {
  const first: ScriptTurn = {
    reasoning: "Start with the first file.",
    content: "I'll write f1 first.",
    tool_calls: [h.shell("printf 1 > f1")],
  };
  return [
    ...Array<ScriptTurn>(h.cannedAssistantTurns ?? 0).fill(first),
    first,
    { reasoning: "Two files at once.", tool_calls: [h.shell("printf 2 > f2"), h.shell("printf 3 > f3")] },
    { tool_calls: [h.shell("cat f1 f2 f3 > all.txt")] }, // no thinking this turn
    { reasoning: "Check its size.", tool_calls: [h.shell("wc -c all.txt")] },
    { reasoning: "Look around.", content: "Listing the files.", tool_calls: [h.shell("ls")] },
    { reasoning: "Two more files.", tool_calls: [h.shell("printf 4 > f4"), h.shell("printf 5 > f5")] },
    { reasoning: "Append them.", tool_calls: [h.shell("cat f4 f5 >> all.txt")] },
    { reasoning: "Everything is written.", content: `Done: all.txt holds ${EXPECTED}.` },
    ...(h.sideThreads ?? []),
  ];
}

/** A session with a sub-agent: main delegates a side file, the sub-agent writes it, main writes all.txt. */
function subAgentSession(h: Harness): ScriptTurn[] {
  const first: ScriptTurn = {
    reasoning: "Delegate the side file.",
    content: "Delegating sub.txt.",
    tool_calls: [h.subAgent!(SUBTASK)],
  };
  // A harness's canned reply opens the sub-agent's conversation too (Qwen Code's).
  const subFirst: ScriptTurn = {
    thread: "SUBTASK:",
    reasoning: "Write it.",
    tool_calls: [h.shell("printf sub > sub.txt")],
  };
  const canned = h.cannedAssistantTurns ?? 0;
  return [
    ...Array<ScriptTurn>(canned).fill(first),
    first,
    ...Array<ScriptTurn>(canned).fill(subFirst),
    subFirst,
    { thread: "SUBTASK:", reasoning: "Written.", content: "sub.txt holds sub." },
    { reasoning: "Now the main file.", tool_calls: [h.shell(`printf ${EXPECTED} > all.txt`)] },
    { reasoning: "Done.", content: `Done: all.txt holds ${EXPECTED}.` },
    ...(h.sideThreads ?? []),
  ];
}

function reversedArguments(call: ScriptToolCall): ScriptToolCall {
  const args = call.arguments;
  return typeof args === "string" ? call : { ...call, arguments: Object.fromEntries(Object.entries(args).reverse()) };
}

/**
 * A session of 24 model calls: a shell call a turn, varied as a model varies them (every third turn two calls at once,
 * every fifth text before its call, every seventh without thinking, every fourth with its arguments in reverse order —
 * models do not keep a schema's key order, and harnesses that parse arguments with their schema write them back in
 * its order), the last turn answers.
 */
function longSession(h: Harness): ScriptTurn[] {
  const first: ScriptTurn = {
    reasoning: "Start.",
    content: "Writing the parts.",
    tool_calls: [h.shell("printf 1 > f1")],
  };
  const turns: ScriptTurn[] = [...Array<ScriptTurn>(h.cannedAssistantTurns ?? 0).fill(first), first];
  for (let i = 2; i <= 22; i++) {
    const write = h.shell(`printf ${i % 10} > p${i}`);
    const calls = [i % 4 === 0 ? reversedArguments(write) : write, ...(i % 3 === 0 ? [h.shell(`wc -c p${i}`)] : [])];
    turns.push({
      ...(i % 7 === 0 ? {} : { reasoning: `Step ${i}: one more part.` }),
      ...(i % 5 === 0 ? { content: `Writing part ${i}.` } : {}),
      tool_calls: calls,
    });
  }
  turns.push({ reasoning: "Combine.", tool_calls: [h.shell(`printf ${EXPECTED} > all.txt`)] });
  turns.push({ reasoning: "Everything is written.", content: `Done: all.txt holds ${EXPECTED}.` });
  return [...turns, ...(h.sideThreads ?? [])];
}

/** Arguments as a model may write them: spaced around the colons, non-ASCII escaped (harnesses re-serialize both). */
function looselyWritten(call: ScriptToolCall): ScriptToolCall {
  if (typeof call.arguments === "string") return call;
  const fields = Object.entries(call.arguments).map(
    ([k, v]) =>
      `${JSON.stringify(k)} : ${JSON.stringify(v).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}`,
  );
  return { ...call, arguments: `{ ${fields.join(" , ")} }` };
}

const withArguments = (call: ScriptToolCall, extra: Record<string, unknown>): ScriptToolCall =>
  typeof call.arguments === "string" ? call : { ...call, arguments: { ...call.arguments, ...extra } };

/**
 * Tool calls as models write them when they do not follow the schema to the letter, each of which a harness may
 * write back otherwise than sampled (or refuse): text before two calls whose arguments are in reverse key order,
 * arguments spaced and escaped, an argument the schema does not have, a number given as a string, a command that
 * fails, the same call twice at once, several lines of text before a call without thinking.
 */
function irregularSession(h: Harness): ScriptTurn[] {
  const first: ScriptTurn = {
    reasoning: "Start.",
    content: "Writing the parts.",
    tool_calls: [h.shell("printf 1 > f1")],
  };
  return [
    ...Array<ScriptTurn>(h.cannedAssistantTurns ?? 0).fill(first),
    first,
    {
      reasoning: "Two at once, keys as they come.",
      content: "Two more parts.",
      tool_calls: [reversedArguments(h.shell("printf 2 > f2")), reversedArguments(h.shell("wc -c f2"))],
    },
    { reasoning: "Spaced arguments.", tool_calls: [looselyWritten(h.shell("printf 3 > f3 # café"))] },
    { reasoning: "An extra argument.", tool_calls: [withArguments(h.shell("printf 4 > f4"), { note: "extra" })] },
    { reasoning: "A number as a string.", tool_calls: [withArguments(h.shell("wc -c f4"), { timeout: "60000" })] },
    { reasoning: "This one fails.", tool_calls: [h.shell("cat missing-file")] },
    { reasoning: "The same call twice.", tool_calls: [h.shell("ls"), h.shell("ls")] },
    {
      content: "Next:\n\n- write f5\n- combine the parts\n",
      tool_calls: [h.shell("printf 5 > f5")],
    },
    { reasoning: "Combine.", tool_calls: [h.shell("cat f1 f2 f3 f4 f5 > all.txt")] },
    { reasoning: "Everything is written.", content: `Done: all.txt holds ${EXPECTED}.` },
    ...(h.sideThreads ?? []),
  ];
}

/** Three prompts in one session: the second and third continue the first (the harness's continue/resume switch). */
function continuedSession(h: Harness): ScriptTurn[] {
  return [
    ...Array<ScriptTurn>(h.cannedAssistantTurns ?? 0).fill({ content: "Ready." }),
    { reasoning: "First file.", content: "Writing f1.", tool_calls: [h.shell("printf 12 > f1")] },
    { reasoning: "Written.", content: "f1 holds 12." },
    { reasoning: "Second file.", tool_calls: [h.shell("printf 345 > f2")] },
    { reasoning: "Written.", content: "f2 holds 345." },
    { reasoning: "Combine them.", tool_calls: [h.shell("cat f1 f2 > all.txt")] },
    { reasoning: "Done.", content: `Done: all.txt holds ${EXPECTED}.` },
    ...(h.sideThreads ?? []),
  ];
}

const SUMMARY =
  "<state_snapshot>The user asked to build all.txt from parts written with the shell. f1 holds 12 and f2 holds 345, " +
  "both written in the workspace. Next: combine f1 and f2 into all.txt with cat, which then holds 12345.</state_snapshot>";
const COMPACT_FIRST = "Write f1 and f2 as scripted.";
const COMPACT_LAST = "Combine f1 and f2 into all.txt.";

/**
 * Work, a compaction (the harness's command, or its own past a context budget set low), more work: the sim answers
 * the summarization request with a summary, and the turns after it by their prompt (the history is shorter then).
 */
function compactionSession(h: Harness): ScriptTurn[] {
  const summaryRequest = h.compaction!.summaryRequest;
  return [
    {
      prompt: COMPACT_FIRST,
      reasoning: "First file.",
      content: "Writing f1.",
      tool_calls: [h.shell("printf 12 > f1")],
    },
    { prompt: COMPACT_FIRST, reasoning: "Second file.", tool_calls: [h.shell("printf 345 > f2")] },
    // Output worth compacting: a harness refuses a summary longer than the history it replaces (Qwen Code does).
    { prompt: COMPACT_FIRST, reasoning: "Check the numbers.", tool_calls: [h.shell("seq 1 400")] },
    { prompt: COMPACT_FIRST, reasoning: "Both written.", content: "f1 and f2 are written." },
    { prompt: summaryRequest, reasoning: "Summarize the work so far.", content: SUMMARY },
    { prompt: COMPACT_LAST, reasoning: "Combine them.", tool_calls: [h.shell("cat f1 f2 > all.txt")] },
    { prompt: COMPACT_LAST, reasoning: "Done.", content: `Done: all.txt holds ${EXPECTED}.` },
    ...(h.sideThreads ?? []),
  ];
}

/** A session to run: the sim's script and the prompts (each after the first continues the session). */
export interface SessionPlan {
  script: ScriptTurn[];
  prompts: string[];
  /** Why this harness cannot run the session (listed in the table instead). */
  unsupported?: string;
  /** Launch with the harness's context budget set low, so that it compacts by itself. */
  compact?: boolean;
}

const PROMPT = "Build all.txt as scripted: write the files, then combine them.";
const one = (script: ScriptTurn[]): SessionPlan => ({ script, prompts: [PROMPT] });

const SESSIONS: Record<string, (h: Harness) => SessionPlan> = {
  main: (h) => one(mainSession(h)),
  "sub-agent": (h) =>
    h.subAgent
      ? one(subAgentSession(h))
      : { script: [], prompts: [], unsupported: h.noSubAgent ?? "no sub-agent tool" },
  long: (h) => one(longSession(h)),
  irregular: (h) => one(irregularSession(h)),
  compaction: (h) =>
    h.compaction
      ? {
          script: compactionSession(h),
          prompts: [COMPACT_FIRST, ...(h.compaction.command ? [h.compaction.command] : []), COMPACT_LAST],
          compact: h.compaction.command === undefined,
        }
      : { script: [], prompts: [], unsupported: h.noCompaction ?? "no compaction" },
  continued: (h) => ({
    script: continuedSession(h),
    prompts: ["Write f1 as scripted.", "Now write f2.", "Combine them into all.txt."],
  }),
};

interface Row {
  harness: string;
  session: string;
  outcome: string;
  calls: string;
  segments: string;
  breaks: string;
  amplification: string;
  trained: string;
}

function summarize(
  harness: string,
  session: string,
  outcome: string,
  calls: CallRecord[],
  rec: Reconstruction | null,
): Row {
  const ok = calls.filter((c) => c.status === "ok").length;
  const bySegment = new Map<string, number>();
  for (const t of rec?.trajectories ?? []) bySegment.set(t.segment, (bySegment.get(t.segment) ?? 0) + 1);
  // By kind and, where the ids tell, cause: `reserialization (reasoning_dropped) 2`.
  const byCause = new Map<string, number>();
  for (const b of rec?.breaks ?? []) {
    const key = b.cause ? `${b.kind} (${b.cause})` : b.kind;
    byCause.set(key, (byCause.get(key) ?? 0) + 1);
  }
  const breaks = [...byCause].map(([k, n]) => `${k} ${n}`);
  const s = rec?.stats;
  return {
    harness,
    session,
    outcome,
    calls: `${ok}/${calls.length}`,
    segments: [...bySegment].map(([k, n]) => `${k} ${n}`).join(", ") || "-",
    breaks: breaks.join(", ") || "none",
    amplification: s ? s.amplification.toFixed(3) : "-",
    trained: s
      ? `${s.trainedTokens}/${s.sampledTokens} = ${(s.trainedTokens / Math.max(1, s.sampledTokens)).toFixed(3)}`
      : "-",
  };
}

async function startServe(
  upstream: string,
  modelMap: string | undefined,
  serveArgs: string[],
  dataDir: string,
): Promise<{ serve: CliProcess; url: string }> {
  const args = [
    "serve",
    "--upstream",
    upstream,
    "--port",
    "0",
    "--grpc-port",
    "0",
    "--data",
    dataDir,
    ...(modelMap ? ["--model-map", modelMap] : []),
    ...serveArgs,
  ];
  const serve = spawnCli(args);
  try {
    const [, url] = await serve.waitFor(/listening on (http:\/\/\S+)/, 180_000);
    return { serve, url: url! };
  } catch (error) {
    await serve.kill();
    throw new Error(`rlgate serve ${serveArgs.join(" ")} did not start:\n${serve.output()}`, { cause: error });
  }
}

async function runSession(
  h: Harness,
  session: string,
  plan: SessionPlan,
  serveArgs: string[],
  timeoutMs: number,
  family: MatrixFamily,
  saveDir: string | undefined,
  verbose = false,
  keepStore = false,
): Promise<Row> {
  let sim: SimServer | null = null;
  let serve: CliProcess | null = null;
  let modelDir: string | null = null;
  const dataDir = tempDir("matrix-store");
  const dirs = harnessDirs("matrix");
  try {
    const setup = familySetup(family);
    sim = await startSim({
      port: 0,
      script: setup.script(plan.script),
      maxModelLen: 131_072,
      ...(setup.toolCallParser ? { toolCallParser: setup.toolCallParser } : {}),
      ...reasoningFieldOf(serveArgs),
    });
    modelDir = setup.modelDir();
    const familyArgs = modelDir ? ["--model-dir", modelDir] : [];
    const started = await startServe(sim.url, h.modelMap, [...familyArgs, ...serveArgs], dataDir);
    serve = started.serve;
    const rollout = await createRollout(started.url, { harness: h.name, task: `matrix/${session}` });
    // The ids decode in the family's markup only with its model directory (kept with the store).
    if (keepStore)
      process.stderr.write(
        `\n  store kept: rlgate show --data ${dataDir}${modelDir ? ` --model-dir ${modelDir}` : ""} ${rollout.id}\n`,
      );
    let run: CliRun | null = null;
    for (const [i, prompt] of plan.prompts.entries()) {
      const { command, args, env } = h.launch(dirs, rollout, prompt, SERVED_MODEL, {
        resume: i > 0,
        compact: plan.compact,
      });
      run = await runCli(command, args, { cwd: dirs.workspace, env, timeoutMs });
      if (verbose)
        process.stderr.write(`\n  $ ${prompt}\n  ${(run.stdout + run.stderr).slice(-800).replaceAll("\n", "\n  ")}\n`);
      if (run.timedOut || run.code !== 0) break;
    }
    const calls = await rolloutCalls(started.url, rollout.id);
    let written = "";
    try {
      written = readFileSync(join(dirs.workspace, "all.txt"), "utf8");
    } catch {
      written = "(none)";
    }
    if (run === null) throw new Error("a session without prompts");
    const outcome = run.timedOut
      ? "timeout"
      : run.code !== 0
        ? `exit ${run.code}`
        : written === EXPECTED
          ? "ok"
          : `all.txt=${JSON.stringify(written)}`;
    if (outcome !== "ok")
      process.stderr.write(`  ${h.name}: ${outcome}\n  ${run.stderr.slice(-1500).replaceAll("\n", "\n  ")}\n`);
    if (saveDir) {
      mkdirSync(saveDir, { recursive: true });
      const file = join(saveDir, `${h.name.replaceAll("/", "-")}-${session}.json`);
      writeFileSync(file, JSON.stringify(calls.sort((a, b) => a.seq - b.seq)));
    }
    const rec = calls.length ? await finishAndReconstruct(started.url, rollout.id) : null;
    return summarize(h.name, session, outcome, calls, rec);
  } finally {
    await serve?.kill("SIGTERM");
    await sim?.close();
    if (!keepStore) rmSync(dataDir, { recursive: true, force: true });
    rmSync(dirs.dir, { recursive: true, force: true });
    if (modelDir && !keepStore) rmSync(modelDir, { recursive: true, force: true });
  }
}

function printTable(rows: Row[]): void {
  const head: Row = {
    harness: "harness",
    session: "session",
    outcome: "task",
    calls: "calls ok",
    segments: "trajectories per segment",
    breaks: "breaks",
    amplification: "amplif.",
    trained: "trained/sampled",
  };
  const keys = Object.keys(head) as (keyof Row)[];
  const width = Object.fromEntries(
    keys.map((k) => [k, Math.max(...[head, ...rows].map((r) => r[k].length))]),
  ) as Record<keyof Row, number>;
  const line = (r: Row) => `| ${keys.map((k) => r[k].padEnd(width[k])).join(" | ")} |`;
  console.log(line(head));
  console.log(`|${keys.map((k) => "-".repeat(width[k] + 2)).join("|")}|`);
  for (const r of rows) console.log(line(r));
}

async function main(): Promise<void> {
  const program = new Command("harness-matrix")
    .description(
      "Run every installed harness CLI through an rlgate gateway on a scripted session and tabulate its trajectories. Options not listed here are passed to `rlgate serve`.",
    )
    .option("--harness <names>", `comma-separated subset of: ${HARNESSES.map((h) => h.name).join(", ")}`)
    .option(
      "--sessions <names>",
      `comma-separated sessions to run: ${Object.keys(SESSIONS).join(", ")}; "all" runs every one`,
      "main",
    )
    .option("--sub-agent", "also run the sub-agent session (same as adding sub-agent to --sessions)", false)
    .option("--verbose", "print the tail of each harness run's output", false)
    .option(
      "--keep-stores",
      "keep each session's gateway store and print the `rlgate show` command that reads it",
      false,
    )
    .option(
      "--save-calls <dir>",
      "write each session's call records (request bodies, ids) to <dir>/<harness>-<session>.json",
    )
    .option("--timeout-ms <ms>", "kill a harness that has not finished by then", (v) => Number(v), 240_000)
    .option(
      "--family <name>",
      "the model family: qwen3 (hermes tool calls), qwen3-coder (XML tool calls, Qwen3-Coder's template), llama3 (Llama 3.2's tokenizer and template, llama3_json tool calls, parallel calls made one at a time), deepseek-v3.1 (vLLM's V3.1 tool template, deepseek_v31 tool calls, non-thinking; its messages mode parts every call, see docs/prompt-modes.md) or gpt-oss (harmony prompts, openai tool calls, parallel calls made one at a time; its messages mode re-serializes every earlier turn, see docs/prompt-modes.md)",
      "qwen3",
    )
    .allowUnknownOption()
    .allowExcessArguments();
  program.parse(process.argv);
  const opts = program.opts<{
    harness?: string;
    sessions: string;
    subAgent: boolean;
    saveCalls?: string;
    keepStores: boolean;
    verbose: boolean;
    timeoutMs: number;
    family: string;
  }>();
  const sessionNames = opts.sessions === "all" ? Object.keys(SESSIONS) : opts.sessions.split(",");
  if (opts.subAgent && !sessionNames.includes("sub-agent")) sessionNames.push("sub-agent");
  const unknown = sessionNames.filter((n) => !(n in SESSIONS));
  if (unknown.length > 0) {
    process.stderr.write(`--sessions: unknown ${unknown.join(", ")}; known: ${Object.keys(SESSIONS).join(", ")}\n`);
    process.exit(2);
  }
  if (!(MATRIX_FAMILIES as readonly string[]).includes(opts.family)) {
    process.stderr.write(`--family: expected ${MATRIX_FAMILIES.join(", ")}; got ${opts.family}\n`);
    process.exit(2);
  }
  const family = opts.family as MatrixFamily;
  const serveArgs = program.args;
  const wanted = opts.harness ? new Set(opts.harness.split(",")) : null;
  const harnesses = HARNESSES.filter((h) => !wanted || wanted.has(h.name));
  const rows: Row[] = [];
  const sessions = harnesses.flatMap((h) =>
    sessionNames.map((session) => ({ h, session, plan: SESSIONS[session]!(h) })),
  );
  process.stderr.write(
    `rlgate harness matrix: ${sessions.length} sessions, family ${family}, serve ${serveArgs.join(" ") || "(defaults)"}\n`,
  );
  for (const [i, { h, session, plan }] of sessions.entries()) {
    if (!isInstalled(h)) {
      rows.push(summarize(h.name, session, "not installed", [], null));
      continue;
    }
    if (plan.unsupported) {
      rows.push(summarize(h.name, session, `n/a: ${plan.unsupported}`, [], null));
      continue;
    }
    const started = Date.now();
    process.stderr.write(`[${i + 1}/${sessions.length}] ${h.name} (${session}) …`);
    try {
      rows.push(
        await runSession(
          h,
          session,
          plan,
          serveArgs,
          opts.timeoutMs,
          family,
          opts.saveCalls,
          opts.verbose,
          opts.keepStores,
        ),
      );
    } catch (error) {
      rows.push(summarize(h.name, session, `failed: ${(error as Error).message.split("\n")[0]}`, [], null));
    }
    process.stderr.write(` ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  }
  printTable(rows);
  if (rows.some((r) => r.outcome !== "ok" && r.outcome !== "not installed" && !r.outcome.startsWith("n/a")))
    process.exitCode = 1;
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    killLiveRuns();
    process.exit(130);
  });
}
await main();
