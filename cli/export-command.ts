// `rlgate export`: selected rollouts' trajectories to JSONL or Parquet (token ids, loss mask, logprobs, reward, group,
// segment), with a progress bar and a summary.
import { Command, InvalidArgumentError, Option } from "commander";
import { resolve } from "node:path";
import { TRAIN_SEGMENTS_HELP, trainSegmentsOption } from "./train-segments-option.ts";
import { MODEL_DIR_HELP, modelOf } from "./model-dir-option.ts";
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
import type { ExportSink } from "../replay/export.ts";
import type { TrainerRow } from "../replay/export-trainers.ts";

type Format = "jsonl" | "parquet" | "verl" | "openrlhf";

/** --format when given, else from the output's name (`.parquet`, `.pq`); JSONL otherwise. */
export function exportFormat(format: Format | undefined, out: string | undefined): Format {
  if (format) return format;
  return out && /\.(parquet|pq)$/i.test(out) ? "parquet" : "jsonl";
}

export function exportCommand(): Command {
  const command = new Command("export")
    .summary("selected rollouts' trajectories as JSONL or Parquet rows a Python trainer reads")
    .description(
      "Reconstruct the selected finished rollouts and write one row per trajectory: rollout_id, trajectory_index, " +
        "trajectory_id, group, task, harness, policy_version, status, reward, segment, segment_id, trained, flagged, " +
        "flag_reasons, num_tokens, token_ids, loss_mask, logprobs (0 on context, null where the upstream sent none), " +
        "advantages (null: the RL core computes them), spans, breaks.\n\n" +
        "JSONL (the default): one JSON object per line, to a file or stdout.\n" +
        "Parquet (--format parquet, or an -o name ending .parquet): token_ids list<int32>, loss_mask list<uint8>, " +
        "logprobs and advantages list<float>, in row groups of --row-group-tokens tokens.\n\n" +
        "Read it in Python: pandas.read_parquet('out.parquet') or pyarrow.parquet.read_table('out.parquet');\n" +
        "rows = [json.loads(l) for l in open('out.jsonl')]; numpy.asarray(row['token_ids'], 'int32').\n\n" +
        "Trainers (Parquet, trained trajectories only; docs/trainers.md): --format verl writes verl's RL dataset " +
        "columns (prompt chat messages, data_source, ability, reward_model, extra_info) and the trajectory split at " +
        "its first trained token (prompt_ids, response_ids, response_mask, rollout_log_probs), reward, uid (group), " +
        "rollout_uid; --format openrlhf writes OpenRLHF's prompt dataset columns (input, label) and the sample as " +
        "OpenRLHF lays it out (sequences, action_mask and rollout_log_probs shifted by one, response_length, " +
        "total_length), reward, uid, rollout_uid.",
    )
    .argument("[rollouts...]", "rollout ids (or select with --group / --since)")
    .option("-o, --out <file>", "where to write (default: standard output; Parquet needs a file)")
    .addOption(
      new Option(
        "--format <format>",
        "output format (default: parquet for an -o name ending .parquet or .pq, else jsonl)",
      ).choices(["jsonl", "parquet", "verl", "openrlhf"]),
    )
    .option(
      "--row-group-tokens <n>",
      "Parquet: write a row group each time the buffered trajectories hold this many tokens (bounds memory)",
      positiveInteger,
      262_144,
    )
    .option(
      "--train-segments <kinds>",
      TRAIN_SEGMENTS_HELP.replace("wins", "is used when this is not given"),
      trainSegmentsOption,
    )
    .option("--max-leaves <n>", "flag rollouts with more leaves than this", positiveInteger, 64)
    .option("--model-dir <dir>", MODEL_DIR_HELP)
    .option("--trained-only", "only trajectories that are trained (trained segment, rollout not flagged)");
  withSourceOptions(command);
  withSelectionOptions(command);
  return command.action((ids: string[], opts: SourceCliOptions & Record<string, any>) =>
    runCommand(async () => {
      const selection = selectionOf(ids, opts);
      const format = exportFormat(opts["format"], opts["out"]);
      const out: string | null = opts["out"] ? resolve(opts["out"]) : null;
      const trainer = format === "verl" || format === "openrlhf" ? format : null;
      if ((format === "parquet" || trainer) && out === null) {
        throw new InvalidArgumentError(
          `${trainer ? `--format ${trainer} writes Parquet, a binary file` : "Parquet is a binary file"}: name it with -o, e.g. -o rollouts.parquet`,
        );
      }
      const { exportRows, addToTotals } = await import("../replay/export.ts");
      const model = opts["modelDir"] ? await modelOf(opts["modelDir"]) : null;
      const source = await sourceOf(opts);
      try {
        const rollouts = await source.select(selection);
        if (rollouts.length === 0) throw new Error(`no finished rollout in ${source.where} matches the selection`);
        const started = performance.now();
        const { ParquetSink } = await import("../replay/export-parquet.ts");
        const parquet = { rowGroupTokens: opts["rowGroupTokens"], createdBy: "rlgate 0.1.0" };
        const trainers = trainer ? await import("../replay/export-trainers.ts") : null;
        const sink: ExportSink<any> = trainers
          ? await ParquetSink.open<TrainerRow>(out!, {
              ...parquet,
              columns: trainers.TRAINER_COLUMNS[trainer!],
              tokens: trainers.trainerRowTokens,
            })
          : format === "parquet"
            ? await ParquetSink.open(out!, parquet)
            : await (await import("../replay/export-jsonl.ts")).JsonlSink.open(out);
        let written = 0;
        const totals = { rollouts: 0, trajectories: 0, tokens: 0, trainedTokens: 0, flaggedRollouts: 0 };
        const bar = progressBar("exporting", rollouts.length);
        let bytes: number;
        try {
          for (const rollout of rollouts) {
            const calls = await source.calls(rollout.id);
            const rows = exportRows(rollout, calls, {
              trainSegments: opts["trainSegments"],
              maxLeaves: opts["maxLeaves"],
              trainedOnly: trainer !== null || opts["trainedOnly"] === true,
              ...(model ? { chatFormat: model.chatFormat } : {}),
            });
            if (trainers) {
              // Trainers get trajectories with a trained token; the totals count what was written.
              const out = trainers.trainerRows(trainer!, rollout, calls, rows, written);
              written += out.length;
              await sink.write(out);
              const ids = new Set(out.map((r) => r.trajectory_id));
              addToTotals(
                totals,
                rows.filter((r) => ids.has(r.trajectory_id)),
              );
            } else {
              await sink.write(rows);
              addToTotals(totals, rows);
            }
            bar.tick();
          }
          ({ bytes } = await sink.finish());
        } catch (error) {
          await sink.abort();
          throw error;
        } finally {
          bar.stop();
        }
        const seconds = (performance.now() - started) / 1000;
        // The summary goes to stderr so that stdout stays pure JSONL when no --out is given.
        console.error(
          table(
            ["rollouts", "flagged", "trajectories", "tokens", "trained tokens", "bytes", "seconds", "written to"],
            [
              [
                totals.rollouts,
                totals.flaggedRollouts,
                totals.trajectories,
                totals.tokens,
                totals.trainedTokens,
                bytes,
                seconds.toFixed(2),
                `${out ?? "stdout"} (${format})`,
              ],
            ],
          ),
        );
        return 0;
      } finally {
        await source.close();
      }
    }),
  );
}
