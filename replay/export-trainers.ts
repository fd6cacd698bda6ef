// `rlgate export --format verl|openrlhf`: trained trajectories as Parquet rows those trainers load. Each row carries
// (1) the dataset columns the framework's own dataset class reads — verl's RLHFDataset (verl/utils/dataset/
// rl_dataset.py: a `prompt` chat column, `data_source`, `reward_model`, `extra_info`) or OpenRLHF's PromptDataset
// (openrlhf/datasets/prompts_dataset.py preprocess_data: `input` chat messages with --data.apply_chat_template,
// `label`), so the captured tasks can be trained on again; and (2) the captured trajectory split as that framework
// lays out a sample, for offline RL / SFT on it: verl's prompt/response split (agent_loop.py AgentLoopOutput:
// prompt_ids, response_ids, response_mask, rollout_log_probs), OpenRLHF's whole sequence with the action mask
// shifted by one (samples_generator.py _process_response_into_experience: action_mask[1:], rollout_log_probs[1:]).
// The prompt ends at the trajectory's first trained token, as in the Python adapters (rlgate_client.adapters).
import type { CallRecord, RolloutRecord } from "../store/records.ts";
import type { ExportRow } from "./export.ts";
import { list, element, scalar, STRING, versionRunsColumn, type Column } from "./export-parquet.ts";
import { sliceVersionRuns, type VersionRun } from "./export-versions.ts";

export type TrainerFormat = "verl" | "openrlhf";

export interface ChatMessage {
  role: string;
  content: string;
}

interface Common {
  rollout_id: string;
  trajectory_id: string;
  trajectory_index: number;
  /** The rollout's group as the export knows it: `group:NAME@ROUND` with a round, `group:NAME` without (the core's
   *  fill-order generation is not known here), `rollout:ID` for a rollout without a group. */
  uid: string;
  rollout_uid: string;
  group: string | null;
  task: string | null;
  harness: string | null;
  reward: number | null;
  /** The chat messages of the call whose completion starts the trajectory's training (its prompt), text only. */
  prompt: ChatMessage[] | null;
}

export interface VerlRow extends Common {
  data_source: string;
  ability: string;
  reward_model: { style: string; ground_truth: string | null };
  extra_info: { index: number; rollout_id: string; trajectory_id: string; group: string | null; split: string };
  prompt_ids: number[];
  response_ids: number[];
  response_mask: number[];
  rollout_log_probs: Array<number | null>;
  /** The policy version of each response token, as runs over response positions (export-versions.ts). */
  response_version_runs: VersionRun[];
}

export interface OpenrlhfRow extends Common {
  input: ChatMessage[] | null;
  label: string;
  sequences: number[];
  action_mask: number[];
  rollout_log_probs: Array<number | null>;
  response_length: number;
  total_length: number;
  /** The policy version of each token of `sequences`, as runs over its positions (export-versions.ts). */
  version_runs: VersionRun[];
}

export type TrainerRow = VerlRow | OpenrlhfRow;

/** Text of a chat message's content: a string as it is, text parts joined, anything else (images, null) as "". */
function text(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((p) => (p && typeof p === "object" && typeof (p as any).text === "string" ? (p as any).text : ""))
      .join("");
  }
  return "";
}

/** The forwarded request's messages (chat completions; Messages and Responses calls are forwarded as chat), or a
 *  completions call's prompt as one user message; null when the call had neither. */
export function promptMessages(call: CallRecord | undefined): ChatMessage[] | null {
  const body = call?.requestForwarded as Record<string, unknown> | null | undefined;
  if (!body || typeof body !== "object") return null;
  if (Array.isArray(body["messages"])) {
    return (body["messages"] as any[]).map((m) => ({ role: String(m?.role ?? ""), content: text(m?.content) }));
  }
  if (typeof body["prompt"] === "string") return [{ role: "user", content: body["prompt"] }];
  return null;
}

export function rolloutUid(rollout: RolloutRecord): string {
  if (!rollout.group) return `rollout:${rollout.id}`;
  return rollout.round ? `group:${rollout.group}@${rollout.round}` : `group:${rollout.group}`;
}

/** The rows a trainer format writes for one rollout's export rows: trained trajectories with a trained token. */
export function trainerRows(
  format: TrainerFormat,
  rollout: RolloutRecord,
  calls: readonly CallRecord[],
  rows: readonly ExportRow[],
  firstIndex: number,
): TrainerRow[] {
  const bySeq = new Map(calls.map((c) => [c.seq, c]));
  const out: TrainerRow[] = [];
  for (const row of rows) {
    if (!row.trained || row.flagged) continue;
    const p = row.loss_mask.indexOf(1);
    if (p < 0) continue;
    const span = row.spans.find((s) => s.start <= p && p < s.end);
    const prompt = promptMessages(span ? bySeq.get(span.call_seq) : undefined);
    const common: Common = {
      rollout_id: row.rollout_id,
      trajectory_id: row.trajectory_id,
      trajectory_index: row.trajectory_index,
      uid: rolloutUid(rollout),
      rollout_uid: rollout.id,
      group: row.group,
      task: row.task,
      harness: row.harness,
      reward: row.reward,
      prompt,
    };
    const index = firstIndex + out.length;
    if (format === "verl") {
      out.push({
        ...common,
        data_source: `rlgate/${row.harness ?? "unknown"}`,
        ability: row.task ?? "",
        reward_model: { style: "rlgate", ground_truth: row.task },
        extra_info: {
          index,
          rollout_id: row.rollout_id,
          trajectory_id: row.trajectory_id,
          group: row.group,
          split: "train",
        },
        prompt_ids: row.token_ids.slice(0, p),
        response_ids: row.token_ids.slice(p),
        response_mask: row.loss_mask.slice(p),
        rollout_log_probs: row.logprobs.slice(p),
        response_version_runs: sliceVersionRuns(row.version_runs, p, row.token_ids.length),
      });
    } else {
      const last = row.loss_mask.lastIndexOf(1);
      out.push({
        ...common,
        input: prompt,
        label: row.task ?? "",
        sequences: row.token_ids,
        action_mask: row.loss_mask.slice(1),
        rollout_log_probs: row.logprobs.slice(1),
        response_length: last - p + 1,
        total_length: row.token_ids.length,
        version_runs: row.version_runs,
      });
    }
  }
  return out;
}

const MESSAGES = (name: string, value: (r: any) => unknown): Column<any> =>
  list(
    name,
    [
      { name: "element", repetition_type: "REQUIRED", num_children: 2 },
      { name: "role", ...STRING, repetition_type: "REQUIRED" },
      { name: "content", ...STRING, repetition_type: "REQUIRED" },
    ],
    "OPTIONAL",
    value,
  );

const COMMON: Column<Common>[] = [
  scalar("uid", STRING, "REQUIRED", (r) => r.uid),
  scalar("rollout_uid", STRING, "REQUIRED", (r) => r.rollout_uid),
  scalar("trajectory_id", STRING, "REQUIRED", (r) => r.trajectory_id),
  scalar("trajectory_index", { type: "INT32" }, "REQUIRED", (r) => r.trajectory_index),
  scalar("group", STRING, "OPTIONAL", (r) => r.group),
  scalar("task", STRING, "OPTIONAL", (r) => r.task),
  scalar("harness", STRING, "OPTIONAL", (r) => r.harness),
  scalar("reward", { type: "DOUBLE" }, "OPTIONAL", (r) => r.reward),
];

const INT32S = (name: string, value: (r: any) => number[]) => list(name, element({ type: "INT32" }), "REQUIRED", value);
const UINT8S = (name: string, value: (r: any) => number[]) =>
  list(name, element({ type: "INT32", converted_type: "UINT_8" }), "REQUIRED", value);
const FLOATS = (name: string, value: (r: any) => Array<number | null>) =>
  list(name, element({ type: "FLOAT" }, "OPTIONAL"), "REQUIRED", value);

/** The columns of each trainer format, in file order (docs/trainers.md lists them). */
export const TRAINER_COLUMNS: Record<TrainerFormat, readonly Column<any>[]> = {
  verl: [
    scalar("data_source", STRING, "REQUIRED", (r: VerlRow) => r.data_source),
    MESSAGES("prompt", (r: VerlRow) => r.prompt),
    scalar("ability", STRING, "REQUIRED", (r: VerlRow) => r.ability),
    {
      name: "reward_model",
      schema: [
        { name: "reward_model", repetition_type: "REQUIRED", num_children: 2 },
        { name: "style", ...STRING, repetition_type: "REQUIRED" },
        { name: "ground_truth", ...STRING, repetition_type: "OPTIONAL" },
      ],
      value: (r: VerlRow) => r.reward_model,
    },
    {
      name: "extra_info",
      schema: [
        { name: "extra_info", repetition_type: "REQUIRED", num_children: 5 },
        { name: "index", type: "INT64", repetition_type: "REQUIRED" },
        { name: "rollout_id", ...STRING, repetition_type: "REQUIRED" },
        { name: "trajectory_id", ...STRING, repetition_type: "REQUIRED" },
        { name: "group", ...STRING, repetition_type: "OPTIONAL" },
        { name: "split", ...STRING, repetition_type: "REQUIRED" },
      ],
      value: (r: VerlRow) => ({ ...r.extra_info, index: BigInt(r.extra_info.index) }),
    },
    ...COMMON,
    INT32S("prompt_ids", (r: VerlRow) => r.prompt_ids),
    INT32S("response_ids", (r: VerlRow) => r.response_ids),
    UINT8S("response_mask", (r: VerlRow) => r.response_mask),
    FLOATS("rollout_log_probs", (r: VerlRow) => r.rollout_log_probs),
    versionRunsColumn("response_version_runs", (r: VerlRow) => r.response_version_runs),
  ],
  openrlhf: [
    MESSAGES("input", (r: OpenrlhfRow) => r.input),
    scalar("label", STRING, "REQUIRED", (r: OpenrlhfRow) => r.label),
    ...COMMON,
    INT32S("sequences", (r: OpenrlhfRow) => r.sequences),
    UINT8S("action_mask", (r: OpenrlhfRow) => r.action_mask),
    FLOATS("rollout_log_probs", (r: OpenrlhfRow) => r.rollout_log_probs),
    scalar("response_length", { type: "INT32" }, "REQUIRED", (r: OpenrlhfRow) => r.response_length),
    scalar("total_length", { type: "INT32" }, "REQUIRED", (r: OpenrlhfRow) => r.total_length),
    versionRunsColumn("version_runs", (r: OpenrlhfRow) => r.version_runs),
  ],
};

/** Tokens of a trainer row (the row-group budget). */
export function trainerRowTokens(row: TrainerRow): number {
  return "sequences" in row ? row.sequences.length : row.prompt_ids.length + row.response_ids.length;
}
