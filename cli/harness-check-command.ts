// `rlgate harness-check 'CMD … {prompt} …'`: a user's own harness command line (or a preset's name) runs a scripted
// session against the simulated vLLM through an `rlgate serve`, in both prompt modes by default, and the table says
// what its rollout became as trajectories — main trajectories, breaks with their causes, amplification, sub-agents,
// side calls, trained ÷ sampled — as `npm run harness-matrix` prints it for the built-in harnesses.
import { Command, Option } from "commander";
import { HARNESS_PRESETS, resolveHarness, type Harness, type HarnessScripting } from "../runner/harnesses.ts";
import { killLiveRuns } from "../runner/harness-local.ts";
import type { CallRecord } from "../store/records.ts";
import { offeredTools } from "./harness-check/offered-tools.ts";
import { formatTable, notRun, type Row } from "./harness-check/report.ts";
import { runSession, SERVED_MODEL } from "./harness-check/session-run.ts";
import { SESSIONS } from "./harness-check/sessions.ts";

const PROMPT_MODES = ["messages", "tokens"] as const;

interface CheckOptions {
  like?: string;
  shellTool: string;
  shellArg: string;
  cannedTurns: number;
  sessions: string;
  prompts: string;
  model: string;
  modelMap?: string;
  timeout: number;
  verbose: boolean;
}

/** How the script calls the harness's tools: a preset's (--like, or the preset checked), else the options'. */
function scriptingOf(harness: Harness, o: CheckOptions): HarnessScripting {
  const like = o.like ? HARNESS_PRESETS[o.like] : undefined;
  if (o.like && !like) throw new Error(`--like ${o.like}: not a preset (${Object.keys(HARNESS_PRESETS).join(", ")})`);
  const known = like?.scripting ?? harness.scripting;
  if (known) return known;
  return {
    shell: (command) => ({ name: o.shellTool, arguments: { [o.shellArg]: command } }),
    cannedAssistantTurns: o.cannedTurns,
    noSubAgent: "a command line's sub-agent tool is not known",
    noCompaction: "a command line's compaction is not known",
  };
}

/**
 * The model the harness is given: --model, or, for a preset that puts the name in the URL's path (Gemini CLI), a name
 * of its own family mapped to the sim's, so the CLI runs as it does against its own API.
 */
function modelOf(harness: Harness, o: CheckOptions, defaulted: boolean): { model: string; modelMap?: string } {
  if (defaulted && harness.modelInPath && harness.ownModel)
    return {
      model: harness.ownModel.name,
      modelMap: o.modelMap ?? `${harness.ownModel.pattern}=${SERVED_MODEL}`,
    };
  return { model: o.model, modelMap: o.modelMap };
}

/** A hint when the harness made no call, or never offered the tool the script calls (why a command line fails). */
export function harnessHint(calls: readonly CallRecord[], scripting: HarnessScripting): string | null {
  if (calls.length === 0)
    return "the harness made no call through rlgate: point it at {base_url} (OpenAI style) or {anthropic_base_url}, or read OPENAI_BASE_URL / ANTHROPIC_BASE_URL (--verbose shows its output)";
  const shell = scripting.shell("true").name;
  const offered = new Set(calls.flatMap((c) => offeredTools(c.requestReceived)));
  if (offered.size === 0 || offered.has(shell)) return null;
  return `the script calls the tool '${shell}', which the harness did not offer; it offered: ${[...offered].join(", ")} (--shell-tool, --shell-arg)`;
}

export function harnessCheckCommand(): Command {
  return new Command("harness-check")
    .summary("does your harness give exact trajectories? a scripted session through rlgate, both prompt modes")
    .description(
      "Run your harness's command line (or a preset) through a scripted session against a simulated vLLM behind rlgate, in both prompt modes, and print what its rollouts became: main trajectories, breaks with causes, amplification, sub-agents, side calls, trained/sampled. Arguments after the command go to `rlgate serve`.",
    )
    .argument(
      "<command>",
      "a preset's name, or a shell command line with {prompt} (also {base_url}, {anthropic_base_url}, {model}, {rollout}; OPENAI_BASE_URL, ANTHROPIC_BASE_URL and placeholder keys are set)",
    )
    .argument("[serve-options...]", "options for `rlgate serve` (after --), e.g. -- --no-repair-history")
    .option(
      "--like <preset>",
      "call the tools as this preset's harness does (its shell tool, canned turns, side calls)",
    )
    .option("--shell-tool <name>", "the harness's shell tool, which the scripted model calls", "bash")
    .option("--shell-arg <field>", "the shell tool's argument that holds the command", "command")
    .option(
      "--canned-turns <n>",
      "assistant messages the harness puts in its first request itself",
      (v) => Number.parseInt(v, 10),
      0,
    )
    .option("--sessions <names>", `sessions to run: ${Object.keys(SESSIONS).join(", ")}`, "main")
    .addOption(
      new Option("--prompts <modes>", "prompt modes to run each session in (comma-separated)").default(
        PROMPT_MODES.join(","),
      ),
    )
    .option("--model <name>", "the model name the harness is given ({model})", SERVED_MODEL)
    .option("--model-map <map>", "serve's --model-map, for a harness that asks for its own model names")
    .option("--timeout <seconds>", "stop a run of the harness after this long", (v) => Number(v), 240)
    .option("--verbose", "print the tail of each run's output", false)
    .action(async (spec: string, serveArgs: string[], o: CheckOptions, command: Command) => {
      const harness = resolveHarness(spec);
      const { model, modelMap } = modelOf(harness, o, command.getOptionValueSource("model") === "default");
      const scripting = scriptingOf(harness, o);
      const sessions = o.sessions.split(",");
      const modes = o.prompts.split(",");
      const unknown = [
        ...sessions.filter((n) => !(n in SESSIONS)).map((n) => `session ${n}`),
        ...modes.filter((m) => !(PROMPT_MODES as readonly string[]).includes(m)).map((m) => `prompt mode ${m}`),
      ];
      if (unknown.length) throw new Error(`harness-check: unknown ${unknown.join(", ")}`);
      const why = harness.unavailable?.();
      if (why) throw new Error(`harness ${harness.name}: ${why}`);
      for (const signal of ["SIGINT", "SIGTERM"] as const)
        process.on(signal, () => {
          killLiveRuns();
          process.exit(130);
        });
      const rows: Row[] = [];
      const hints = new Set<string>();
      for (const session of sessions) {
        const plan = SESSIONS[session]!(scripting);
        for (const mode of modes) {
          const label = `${session}, ${mode}`;
          if (plan.unsupported) {
            rows.push(notRun(harness.name, label, `n/a: ${plan.unsupported}`));
            continue;
          }
          process.stderr.write(`${harness.name} (${label}) …`);
          const started = Date.now();
          try {
            const result = await runSession(harness, label, plan, {
              serveArgs: ["--prompts", mode, ...serveArgs],
              timeoutMs: o.timeout * 1000,
              model,
              modelMap,
              verbose: o.verbose,
            });
            rows.push(result.row);
            const hint = harnessHint(result.calls, scripting);
            if (hint) hints.add(hint);
          } catch (error) {
            rows.push(notRun(harness.name, label, `failed: ${(error as Error).message.split("\n")[0]}`));
          }
          process.stderr.write(` ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
        }
      }
      console.log(formatTable(rows));
      console.log(
        "\nExact trajectories: the task ok, one main trajectory, no break, amplification 1.000 (tokens mode: at most 1.02); side calls (auxiliary) and sub-agents are segments of their own, untrained by default (trained/sampled below 1 by their tokens). docs/harnesses.md#checking-your-own-harness says how to read the rest.",
      );
      for (const hint of hints) console.log(`\nhint: ${hint}`);
      if (rows.some((r) => r.outcome !== "ok")) process.exitCode = 1;
    });
}
