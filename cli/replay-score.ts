// `rlgate replay score`: the command line of replay/score.ts — selection, a progress bar, the summary table, --json
// and the exit code a script gates on.
import { Command } from "commander";
import { contextLine } from "../replay/context.ts";
import type { ScoreReport } from "../replay/score.ts";
import type { Agreement } from "../util/agreement.ts";
import { progressBar } from "./progress.ts";
import {
  EXIT,
  positiveInteger,
  positiveNumber,
  runCommand,
  selectionOf,
  sourceOf,
  withSelectionOptions,
  withSourceOptions,
  type SourceCliOptions,
} from "./replay-options.ts";
import { num, table } from "./table.ts";

const FIGURES = ["tokens", "pearson r", "mean |Δ|", "p50 |Δ|", "p99 |Δ|", "max |Δ|", "k3 KL"];

function figureCells(a: Agreement) {
  return [
    a.tokens,
    num(a.pearson, 6),
    num(a.absDiffMean),
    num(a.absDiffP50),
    num(a.absDiffP99),
    num(a.absDiffMax),
    num(a.k3Kl, 6),
  ];
}

export function formatScoreReport(report: ScoreReport, maxP99: number | undefined): string {
  const out: string[] = [];
  out.push(
    `teacher-forced scoring against ${report.upstream}: ${report.completions.length} completions of ${report.rollouts.length} rollouts`,
  );
  out.push("");
  out.push(
    table(
      ["rollout", "harness", "completions", ...FIGURES, `first |Δ| > ${report.threshold}`],
      report.rollouts.map((r) => [
        r.rolloutId,
        r.harness,
        r.completions,
        ...figureCells(r.agreement),
        r.firstBeyond ? `call ${r.firstBeyond.callSeq} token ${r.firstBeyond.position}` : "none",
      ]),
    ),
  );
  out.push("");
  out.push(
    table(
      ["harness", ...FIGURES],
      Object.entries(report.byHarness).map(([h, a]) => [h === "*" ? "all" : h, ...figureCells(a)]),
    ),
  );
  const drifted = report.rollouts.filter((r) => r.firstBeyond);
  if (drifted.length) {
    out.push("");
    out.push(`first token beyond |Δlogp| ${report.threshold} in each rollout (captured → replayed):`);
    for (const r of drifted) {
      const t = r.firstBeyond!;
      out.push(
        `  ${r.rolloutId} call ${t.callSeq} position ${t.position} id ${t.tokenId}: ${num(t.captured)} → ${num(t.replayed)} (Δ ${num(t.delta)})`,
      );
      out.push(`    ${contextLine(t)}`);
    }
  }
  if (report.skipped.length)
    out.push(
      "",
      `${report.skipped.length} completions not scored: ${summarizeReasons(report.skipped.map((s) => s.reason))}`,
    );
  for (const e of report.errors) out.push(`error: ${e.rolloutId} call ${e.callSeq}: ${e.reason}`);
  if (maxP99 !== undefined) {
    const p99 = report.overall.absDiffP99;
    out.push(
      "",
      Number.isNaN(p99) || p99 <= maxP99
        ? `p99 |Δlogp| ${num(p99)} ≤ ${maxP99}: ok`
        : `p99 |Δlogp| ${num(p99)} > ${maxP99}: FAILED`,
    );
  }
  return out.join("\n");
}

function summarizeReasons(reasons: string[]): string {
  const counts = new Map<string, number>();
  for (const r of reasons) counts.set(r, (counts.get(r) ?? 0) + 1);
  return [...counts].map(([r, n]) => `${n} × ${r}`).join(", ");
}

/** 0: scored and within --max-p99; 3: past it; 1: something could not be scored or read. */
export function scoreExitCode(report: ScoreReport, maxP99: number | undefined): number {
  if (report.errors.length) return EXIT.error;
  if (maxP99 !== undefined && report.overall.absDiffP99 > maxP99) return EXIT.gate;
  return EXIT.ok;
}

export function replayScoreCommand(): Command {
  const command = new Command("score")
    .summary("teacher-forced scoring of captured completions on another inference server: per-token logprob drift")
    .description(
      "Send every captured completion back to an inference server as a token-id prompt (prompt ids ++ sampled ids, " +
        "max_tokens 1, prompt_logprobs 0 on vLLM's /v1/completions) and compare the logprob it now gives each sampled " +
        "token with the captured one: Pearson r, mean/p50/p99/max |Δlogp| and k3 KL per rollout, per harness and " +
        "overall, and the first token beyond --threshold shown in its context.\n\n" +
        "Exit codes: 0 scored (and p99 |Δlogp| within --max-p99), 3 p99 |Δlogp| above --max-p99, 1 an error " +
        "(unreachable server, a completion it would not score).",
    )
    .argument("[rollouts...]", "rollout ids (or select with --group / --since)")
    .requiredOption("--upstream <url>", "the inference server to score on (vLLM, or rlgate sim)")
    .option("--upstream-api-key <key>", "API key of that server", process.env.RLGATE_UPSTREAM_API_KEY)
    .option("--model <name>", "model to ask for (default: the one each call was forwarded with)")
    .option("--threshold <x>", "report the first token whose |Δlogp| exceeds this", positiveNumber, 0.5)
    .option("--max-p99 <x>", "exit 3 when the overall p99 |Δlogp| exceeds this", positiveNumber)
    .option("--concurrency <n>", "completions scored at once", positiveInteger, 4)
    .option("--json", "print the report as JSON (per completion, per rollout, per harness)")
    .option(
      "--no-record",
      "do not keep the report where the rollouts came from (the gateway's or the store's replay runs, listed in /ui)",
    );
  withSourceOptions(command);
  withSelectionOptions(command);
  return command.action((ids: string[], opts: SourceCliOptions & Record<string, any>) =>
    runCommand(async () => {
      const selection = selectionOf(ids, opts);
      const [{ ReplayUpstream }, { scoreRollouts }, { qwen3Tokenizer }, { replayRecord, selectionText }] =
        await Promise.all([
          import("../replay/upstream.ts"),
          import("../replay/score.ts"),
          import("../tokenizer/qwen3.ts"),
          import("../replay/score-record.ts"),
        ]);
      const at = Date.now();
      const source = await sourceOf(opts);
      try {
        const rollouts = await source.select(selection);
        if (rollouts.length === 0) throw new Error(`no finished rollout in ${source.where} matches the selection`);
        const bar = progressBar("scoring rollouts", rollouts.length);
        const tokenizer = qwen3Tokenizer();
        const report = await scoreRollouts(rollouts, (id) => source.calls(id), {
          upstream: new ReplayUpstream({ url: opts["upstream"], apiKey: opts["upstreamApiKey"] }),
          model: opts["model"],
          threshold: opts["threshold"],
          concurrency: opts["concurrency"],
          decode: (ids) => tokenizer.decode(ids),
          onProgress: () => bar.tick(),
        }).finally(() => bar.stop());
        console.log(opts["json"] ? JSON.stringify(report, null, 2) : formatScoreReport(report, opts["maxP99"]));
        const exitCode = scoreExitCode(report, opts["maxP99"]);
        if (opts["record"] !== false) {
          const record = replayRecord(report, {
            at,
            source: source.where,
            selection: selectionText(ids, opts.group, opts.since),
            maxP99: opts["maxP99"],
            exitCode,
          });
          // The verdict is the exit code; a report that could not be kept is said, not turned into a failure.
          await source.recordReplay(record).then(
            (id) => console.error(`replay run ${id} recorded in ${source.where} (listed in its /ui)`),
            (error) =>
              console.error(`rlgate: the report was not recorded in ${source.where}: ${(error as Error).message}`),
          );
        }
        return exitCode;
      } finally {
        await source.close();
      }
    }),
  );
}
