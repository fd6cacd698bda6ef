// `rlgate replay resend`: the command line of replay/resend.ts.
import { Command, InvalidArgumentError } from "commander";
import { contextLine } from "../replay/context.ts";
import type { CallComparison, ResendReport } from "../replay/resend.ts";
import { progressBar } from "./progress.ts";
import {
  EXIT,
  positiveInteger,
  runCommand,
  sourceOf,
  withSourceOptions,
  type SourceCliOptions,
} from "./replay-options.ts";

function describeCall(c: CallComparison, index: number): string[] {
  const out = [`call #${index} (seq ${c.callSeq}, ${c.api} → ${c.route}): ${c.same ? "same" : "DIFFERENT"}`];
  if (c.error && c.promptTokens.now === null && c.choices.length === 0) return [...out, `  error: ${c.error}`];
  if (c.error) out.push(`  error: ${c.error}`);
  if (c.promptSame) out.push(`  prompt ids: same (${c.promptTokens.recorded} tokens)`);
  else if (c.promptDifference) {
    const d = c.promptDifference;
    out.push(
      `  prompt ids: differ at position ${d.position} (recorded ${c.promptTokens.recorded} tokens, now ${c.promptTokens.now})`,
    );
    out.push(`    recorded: ${d.recorded ? `${contextLine(d.recorded)} (id ${d.recorded.tokenId})` : "(ends here)"}`);
    out.push(`    now:      ${d.now ? `${contextLine(d.now)} (id ${d.now.tokenId})` : "(ends here)"}`);
  }
  for (const choice of c.choices) {
    const sampled = choice.sampledSame ? "same" : `differ from token ${choice.sampledDiffersAt}`;
    const answer = choice.answerSame ? "same" : `differs in ${choice.answerDifferences.join(", ")}`;
    const differs = !choice.sampledSame || !choice.answerSame;
    const note =
      differs && !choice.deterministic ? " (not greedy or seeded: a difference is expected, not counted)" : "";
    out.push(`  choice ${choice.index}: sampled ids ${sampled}; answer ${answer}${note}`);
  }
  return out;
}

export function formatResendReport(report: ResendReport, indexOf: (seq: number) => number): string {
  const out = [`re-sent ${report.calls.length} calls of rollout ${report.rolloutId} to ${report.upstream}`, ""];
  for (const c of report.calls) out.push(...describeCall(c, indexOf(c.callSeq)));
  for (const s of report.skipped) out.push(`call #${indexOf(s.callSeq)} (seq ${s.callSeq}): not re-sent, ${s.reason}`);
  const same = report.calls.filter((c) => c.same).length;
  out.push("", `${same} of ${report.calls.length} calls the same`);
  return out.join("\n");
}

/** 0: every re-sent call is the same; 3: one differs; 1: one could not be sent. */
export function resendExitCode(report: ResendReport): number {
  if (report.calls.some((c) => c.error && c.promptTokens.now === null)) return EXIT.error;
  return report.calls.every((c) => c.same) ? EXIT.ok : EXIT.gate;
}

export function replayResendCommand(): Command {
  const command = new Command("resend")
    .summary("re-send a rollout's recorded calls as forwarded and compare prompt ids, sampled ids and answers")
    .description(
      "Send a rollout's recorded calls again, exactly as rlgate forwarded them (a recorded stream is re-sent " +
        "non-streamed), and compare: the prompt ids (exact; the first differing position is shown decoded in its " +
        "context — a changed chat template or tokenizer shows here), the sampled ids of greedy or seeded calls, and " +
        "the answer the harness would see (content, reasoning, tool calls, finish reason).\n\n" +
        "Exit codes: 0 every call the same, 3 a call differs, 1 an error (a call the server would not answer).",
    )
    .argument("<rollout>", "the rollout whose calls to re-send")
    .requiredOption("--upstream <url>", "the inference server to send them to (vLLM, or rlgate sim)")
    .option("--upstream-api-key <key>", "API key of that server", process.env.RLGATE_UPSTREAM_API_KEY)
    .option(
      "--call <n...>",
      "only these calls: their number in the rollout (1, 2, …) or their seq",
      (v: string, prev: number[] = []) => {
        const n = Number(v);
        if (!Number.isSafeInteger(n) || n < 1)
          throw new InvalidArgumentError("expected a call number (1, 2, …) or a call seq");
        return [...prev, n];
      },
    )
    .option("--concurrency <n>", "calls sent at once", positiveInteger, 4)
    .option("--json", "print the comparison as JSON");
  withSourceOptions(command);
  return command.action((rolloutId: string, opts: SourceCliOptions & Record<string, any>) =>
    runCommand(async () => {
      const [{ ReplayUpstream }, { resendCalls }, { qwen3Tokenizer }] = await Promise.all([
        import("../replay/upstream.ts"),
        import("../replay/resend.ts"),
        import("../tokenizer/qwen3.ts"),
      ]);
      const source = await sourceOf(opts);
      try {
        const [rollout] = await source.select({ ids: [rolloutId], finishedOnly: false });
        const all = await source.calls(rollout!.id);
        const wanted: number[] | undefined = opts["call"];
        const calls = wanted ? all.filter((c, i) => wanted.includes(i + 1) || wanted.includes(c.seq)) : all;
        if (calls.length === 0)
          throw new Error(
            wanted
              ? `rollout ${rolloutId} has no call ${wanted.join(", ")} (it has ${all.length})`
              : `rollout ${rolloutId} has no calls`,
          );
        const tokenizer = qwen3Tokenizer();
        const bar = progressBar("re-sending", calls.length);
        const report = await resendCalls(rollout!.id, calls, {
          upstream: new ReplayUpstream({ url: opts["upstream"], apiKey: opts["upstreamApiKey"] }),
          decode: (ids) => tokenizer.decode(ids),
          concurrency: opts["concurrency"],
          onProgress: () => bar.tick(),
        }).finally(() => bar.stop());
        const indexOf = (seq: number) => all.findIndex((c) => c.seq === seq) + 1;
        console.log(opts["json"] ? JSON.stringify(report, null, 2) : formatResendReport(report, indexOf));
        return resendExitCode(report);
      } finally {
        await source.close();
      }
    }),
  );
}
