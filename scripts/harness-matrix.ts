// `npm run harness-matrix [-- options] [serve options…]`: every installed harness of the registry (runner/harnesses.ts)
// runs scripted sessions (cli/harness-check/sessions.ts) against the simulated vLLM through an `rlgate serve` gateway
// (started with the serve options given here, passed through as they are: e.g. `--prompts tokens`,
// `--no-repair-history`), and the table says what each rollout looks like as trajectories: how many per segment kind,
// the breaks by kind, the amplification (trajectory tokens ÷ unique tokens) and trained ÷ sampled tokens, read from
// GET /api/rollouts/{id}/trajectories. `rlgate harness-check` runs the same for one command line of a user's.
// `--save-calls DIR` keeps each session's call records: the source of trajectory/golden-cli.test.ts's fixtures.
// `--family qwen3-coder` (or `llama3`, …) runs the sessions on that family's chat format: the sim answers in its
// tool-call syntax and the gateway is given a model directory of that family (matrix-families.ts).
// `--reasoning-field reasoning_content` (a serve option) makes the sim answer as vLLM <= 0.16 too.
import { Command } from "commander";
import { HARNESSES } from "../runner/harnesses.ts";
import { killLiveRuns } from "../runner/harness-local.ts";
import { formatTable, notRun, type Row } from "../cli/harness-check/report.ts";
import { runSession } from "../cli/harness-check/session-run.ts";
import { SESSIONS } from "../cli/harness-check/sessions.ts";
import { REASONING_FIELDS, type ReasoningField } from "../tokenizer/reasoning-field.ts";
import { isInstalled, testModel, testModelMap, whyAbsent } from "../test/e2e/harnesses.ts";
import { familySetup, MATRIX_FAMILIES, type MatrixFamily } from "./matrix-families.ts";

/** serve's `--reasoning-field` (the vLLM version answered as) applies to the matrix's own sim too. */
function reasoningFieldOf(serveArgs: string[]): ReasoningField | undefined {
  const at = serveArgs.findIndex((a) => a === "--reasoning-field" || a.startsWith("--reasoning-field="));
  if (at < 0) return undefined;
  const value = serveArgs[at]!.includes("=") ? serveArgs[at]!.split("=")[1] : serveArgs[at + 1];
  return (REASONING_FIELDS as readonly unknown[]).includes(value) ? (value as ReasoningField) : undefined;
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
  const family = familySetup(opts.family as MatrixFamily);
  const serveArgs = program.args;
  const wanted = opts.harness ? new Set(opts.harness.split(",")) : null;
  const unknownHarness = [...(wanted ?? [])].filter((n) => !HARNESSES.some((h) => h.name === n));
  if (unknownHarness.length > 0) {
    process.stderr.write(
      `--harness: unknown ${unknownHarness.join(", ")}; known: ${HARNESSES.map((h) => h.name).join(", ")}\n`,
    );
    process.exit(2);
  }
  const harnesses = HARNESSES.filter((h) => !wanted || wanted.has(h.name));
  const rows: Row[] = [];
  const sessions = harnesses.flatMap((h) => sessionNames.map((session) => ({ h, session })));
  process.stderr.write(
    `rlgate harness matrix: ${sessions.length} sessions, family ${opts.family}, serve ${serveArgs.join(" ") || "(defaults)"}\n`,
  );
  for (const [i, { h, session }] of sessions.entries()) {
    if (!isInstalled(h)) {
      rows.push(notRun(h.name, session, `not installed: ${whyAbsent(h)}`));
      continue;
    }
    const plan = SESSIONS[session]!(h.scripting!);
    if (plan.unsupported) {
      rows.push(notRun(h.name, session, `n/a: ${plan.unsupported}`));
      continue;
    }
    const started = Date.now();
    process.stderr.write(`[${i + 1}/${sessions.length}] ${h.name} (${session}) …`);
    try {
      const result = await runSession(h, session, plan, {
        serveArgs,
        timeoutMs: opts.timeoutMs,
        family,
        reasoningField: reasoningFieldOf(serveArgs),
        model: testModel(h),
        modelMap: testModelMap(h),
        saveDir: opts.saveCalls,
        verbose: opts.verbose,
        keepStore: opts.keepStores,
      });
      rows.push(result.row);
    } catch (error) {
      rows.push(notRun(h.name, session, `failed: ${(error as Error).message.split("\n")[0]}`));
    }
    process.stderr.write(` ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  }
  console.log(formatTable(rows));
  if (rows.some((r) => r.outcome !== "ok" && !r.outcome.startsWith("not installed") && !r.outcome.startsWith("n/a")))
    process.exitCode = 1;
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    killLiveRuns();
    process.exit(130);
  });
}
await main();
