// `rlgate show <rolloutId>`: a rollout's prefix tree and trajectories as text, with sampled spans set apart from
// context. Reads the calls from a running gateway's control API, or straight from a store directory (--data).
import { Command } from "commander";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { branchOf } from "../gateway/branching/index.ts";
import type { CallRecord, RolloutRecord } from "../store/records.ts";
import { MODEL_DIR_HELP, modelOf } from "./model-dir-option.ts";
import { rolloutTrainSegments } from "../trajectory/train-segments.ts";
import { TRAIN_SEGMENTS_HELP, trainSegmentsOption } from "./train-segments-option.ts";
import { fromSnakeCase } from "../util/json-case.ts";
import { rolloutUiUrl } from "../ui/rollout-link.ts";

async function fromGateway(
  url: string,
  id: string,
  token: string | undefined,
): Promise<{ rollout: RolloutRecord; calls: CallRecord[] }> {
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const get = async (path: string) => {
    let res: Response;
    try {
      res = await fetch(`${url.replace(/\/+$/, "")}${path}`, { headers });
    } catch (error) {
      throw new Error(
        `cannot reach the gateway at ${url} (${(error as Error).message}); start it, pass --gateway, or read a store with --data`,
      );
    }
    const body = (await res.json()) as { error?: { message: string } };
    if (!res.ok) throw new Error(body.error?.message ?? `HTTP ${res.status}`);
    return body as unknown;
  };
  // The API answers in snake_case: read back as the records the reconstruction takes.
  const rollout = fromSnakeCase<RolloutRecord>(await get(`/api/rollouts/${encodeURIComponent(id)}`));
  const { calls } = fromSnakeCase<{ calls: CallRecord[] }>(await get(`/api/rollouts/${encodeURIComponent(id)}/calls`));
  return { rollout, calls };
}

async function fromStore(dir: string, id: string): Promise<{ rollout: RolloutRecord; calls: CallRecord[] }> {
  // Opening creates a store: a mistyped folder would read as an empty one.
  if (!existsSync(dir)) throw new Error(`no store at ${resolve(dir)} (--data: the folder rlgate serve or run wrote)`);
  const { Store } = await import("../store/store.ts");
  const store = new Store({ path: resolve(dir) });
  try {
    const rollout = store.getRollout(id);
    if (!rollout) throw new Error(`no rollout '${id}' in the store at ${resolve(dir)}`);
    return { rollout, calls: store.listCalls(id) };
  } finally {
    await store.close();
  }
}

/**
 * For a branch rollout, the line that says so: its backbone, its point, and which of its calls were answered from the
 * backbone's recording (no upstream call: their "0 tok" below is nothing sampled, not a failure). Null otherwise.
 */
export function branchLine(rollout: RolloutRecord, calls: readonly CallRecord[]): string | null {
  const spec = branchOf(rollout);
  if (!spec) return null;
  const at = `call ${spec.at_call}${spec.at_token === undefined ? "" : `, token ${spec.at_token}`}`;
  // Named as the tree below names them (their seq), and counted.
  const replayed = calls.filter((c) => c.replayOf).map((c) => `#${c.seq}`);
  const diverged = spec.divergence ? "; it diverged from the backbone before its point" : "";
  return (
    `branch of ${spec.of} at ${at}: ` +
    (replayed.length
      ? `${replayed.length} of its ${calls.length} calls replayed from the backbone's recording (${replayed.join(" ")}: no upstream call, nothing sampled, context here)`
      : "no call replayed") +
    diverged
  );
}

export function showCommand(): Command {
  return new Command("show")
    .summary("a rollout's prefix tree and trajectories as text")
    .description(
      "Show a rollout as rlgate reconstructs it: its calls as a prefix tree (branches, segments, breaks) and each trajectory with sampled spans set apart from context",
    )
    .argument("<rolloutId>", "the rollout to show")
    .option("--gateway <url>", "a running gateway to read from", process.env.RLGATE_URL ?? "http://127.0.0.1:8700")
    .option("--token <token>", "control API token of that gateway", process.env.RLGATE_TOKEN)
    .option("--data <dir>", "read a store directory directly instead of a gateway")
    .option("--model-dir <dir>", `${MODEL_DIR_HELP}; its tokens decoded with its tokenizer`)
    .option(
      "--train-segments <kinds>",
      TRAIN_SEGMENTS_HELP.replace("wins", "is used when this is not given"),
      trainSegmentsOption,
    )
    .option("--max-leaves <n>", "flag rollouts with more leaves than this", (v) => Number.parseInt(v, 10), 64)
    .option("--trajectory <id...>", "print only these trajectories in full")
    .option("--full", "print context in full instead of head and tail")
    .option("--json", "print the reconstruction as JSON instead of text")
    .option("--no-color", "no ANSI colours (also when stdout is not a terminal)")
    .action(async (id: string, opts) => {
      let found: { rollout: RolloutRecord; calls: CallRecord[] };
      try {
        found = opts.data ? await fromStore(opts.data, id) : await fromGateway(opts.gateway, id, opts.token);
      } catch (error) {
        // An unknown id, an unreachable gateway, a missing store: each already a sentence, not a stack trace.
        console.error(`rlgate show: ${(error as Error).message}`);
        process.exitCode = 1;
        return;
      }
      const { rollout, calls } = found;
      const { fromCallRecord, reconstructRollout, formatReconstruction, reconstructionToJson } =
        await import("../trajectory/index.ts");
      const model = opts.modelDir ? await modelOf(opts.modelDir) : null;
      const reconstruction = reconstructRollout(calls.map(fromCallRecord), {
        rolloutId: rollout.id,
        reward: rollout.reward,
        trainSegments: opts.trainSegments ?? rolloutTrainSegments(rollout.metadata) ?? undefined,
        maxLeaves: opts.maxLeaves,
        ...(model ? { chatFormat: model.chatFormat } : {}),
      });
      if (opts.json) {
        console.log(JSON.stringify(reconstructionToJson(reconstruction), null, 2));
        return;
      }
      const tokenizer = model?.format ?? (await import("../tokenizer/qwen3.ts")).qwen3Tokenizer();
      console.log(
        `rollout ${rollout.id}  status ${rollout.status}  reward ${rollout.reward ?? "—"}  group ${rollout.group ?? "—"}  harness ${rollout.harness ?? "—"}`,
      );
      const branch = branchLine(rollout, calls);
      if (branch) console.log(branch);
      if (!opts.data) console.log(`in the UI: ${rolloutUiUrl(opts.gateway, rollout.id)}`);
      console.log(
        formatReconstruction(reconstruction, {
          detokenize: (ids) => tokenizer.decode(ids),
          color: opts.color !== false && process.stdout.isTTY === true,
          maxContextChars: opts.full ? Infinity : undefined,
          trajectoryIds: opts.trajectory,
        }),
      );
    });
}
