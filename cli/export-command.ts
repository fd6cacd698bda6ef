// `rlgate export`: selected rollouts' trajectories to JSONL (token ids, loss mask, logprobs, reward, group,
// segment), with a progress bar and a summary.
import { Command, Option } from "commander";
import { createWriteStream, type WriteStream } from "node:fs";
import { once } from "node:events";
import { resolve } from "node:path";
import { TRAIN_SEGMENTS_HELP, trainSegmentsOption } from "./train-segments-option.ts";
import { progressBar } from "./progress.ts";
import {
  positiveInteger,
  runCommand,
  selectionOf,
  sourceOf,
  withSelectionOptions,
  withSourceOptions,
  type SourceCliOptions,
} from "./replay-options.ts";
import { table } from "./table.ts";

async function write(out: NodeJS.WritableStream, text: string): Promise<void> {
  if (!out.write(text)) await once(out, "drain");
}

export function exportCommand(): Command {
  const command = new Command("export")
    .summary("selected rollouts' trajectories as JSONL rows a Python trainer reads")
    .description(
      "Reconstruct the selected finished rollouts and write one JSON object per trajectory and line: rollout_id, " +
        "trajectory_id, group, task, harness, status, reward, segment, trained, flagged, token_ids, loss_mask, logprobs " +
        "(0 on context, null where the upstream sent none), advantages (null: the RL core computes them), spans, breaks.\n\n" +
        "Read it in Python: rows = [json.loads(l) for l in open('out.jsonl')]; numpy.asarray(row['token_ids'], 'int32').\n" +
        "Parquet is not written yet: convert with pandas.read_json('out.jsonl', lines=True).to_parquet(...).",
    )
    .argument("[rollouts...]", "rollout ids (or select with --group / --since)")
    .option("-o, --out <file>", "where to write (default: standard output)")
    .addOption(new Option("--format <format>", "output format").choices(["jsonl"]).default("jsonl"))
    .option(
      "--train-segments <kinds>",
      TRAIN_SEGMENTS_HELP.replace("wins", "is used when this is not given"),
      trainSegmentsOption,
    )
    .option("--max-leaves <n>", "flag rollouts with more leaves than this", positiveInteger, 64)
    .option("--trained-only", "only trajectories that are trained (trained segment, rollout not flagged)");
  withSourceOptions(command);
  withSelectionOptions(command);
  return command.action((ids: string[], opts: SourceCliOptions & Record<string, any>) =>
    runCommand(async () => {
      const selection = selectionOf(ids, opts);
      const { exportRows, addToTotals } = await import("../replay/export.ts");
      const source = await sourceOf(opts);
      let file: WriteStream | null = null;
      try {
        const rollouts = await source.select(selection);
        if (rollouts.length === 0) throw new Error(`no finished rollout in ${source.where} matches the selection`);
        if (opts["out"]) {
          file = createWriteStream(resolve(opts["out"]));
          await once(file, "open");
        }
        const out: NodeJS.WritableStream = file ?? process.stdout;
        const totals = { rollouts: 0, trajectories: 0, tokens: 0, trainedTokens: 0, flaggedRollouts: 0, bytes: 0 };
        const bar = progressBar("exporting", rollouts.length);
        try {
          for (const rollout of rollouts) {
            const rows = exportRows(rollout, await source.calls(rollout.id), {
              trainSegments: opts["trainSegments"],
              maxLeaves: opts["maxLeaves"],
              trainedOnly: opts["trainedOnly"] === true,
            });
            let text = "";
            for (const r of rows) text += `${JSON.stringify(r)}\n`;
            await write(out, text);
            addToTotals(totals, rows, Buffer.byteLength(text));
            bar.tick();
          }
        } finally {
          bar.stop();
        }
        if (file) {
          file.end();
          await once(file, "finish");
        }
        // The summary goes to stderr so that stdout stays pure JSONL when no --out is given.
        console.error(
          table(
            ["rollouts", "flagged", "trajectories", "tokens", "trained tokens", "bytes", "written to"],
            [
              [
                totals.rollouts,
                totals.flaggedRollouts,
                totals.trajectories,
                totals.tokens,
                totals.trainedTokens,
                totals.bytes,
                opts["out"] ? resolve(opts["out"]) : "stdout",
              ],
            ],
          ),
        );
        return 0;
      } finally {
        file?.destroy();
        await source.close();
      }
    }),
  );
}
