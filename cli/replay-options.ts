// Options replay and export share: where captured rollouts are read from and which ones.
import { Command, InvalidArgumentError } from "commander";
import { openSource, parseSince, type RolloutSource, type Selection } from "../replay/source.ts";

/** Exit codes a script can gate on. */
export const EXIT = { ok: 0, error: 1, gate: 3 } as const;

export function positiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError("expected a non-negative number");
  return n;
}

export function positiveInteger(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("expected a positive integer");
  return n;
}

function since(value: string): number {
  try {
    return parseSince(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/** --gateway/--token/--data: where the rollouts are read. */
export function withSourceOptions(command: Command): Command {
  return command
    .option(
      "--gateway <url>",
      "a running gateway to read rollouts from",
      process.env.RLGATE_URL ?? "http://127.0.0.1:8700",
    )
    .option("--token <token>", "control API token of that gateway", process.env.RLGATE_TOKEN)
    .option("--data <dir>", "read a store directory directly instead of a gateway");
}

/** --group/--since: which finished rollouts, when no ids are given. */
export function withSelectionOptions(command: Command): Command {
  return command
    .option("--group <name>", "the finished rollouts of this RL group")
    .option(
      "--since <time>",
      "rollouts finished since: a date (2026-12-01T14:00Z), epoch ms, or a duration ago (30m, 2h)",
      since,
    );
}

export interface SourceCliOptions {
  gateway?: string;
  token?: string;
  data?: string;
  group?: string;
  since?: number;
}

export function selectionOf(ids: readonly string[], opts: SourceCliOptions): Selection {
  if (ids.length === 0 && opts.group === undefined && opts.since === undefined) {
    throw new InvalidArgumentError("name rollouts, or select them with --group or --since");
  }
  return { ids: ids.length ? ids : undefined, group: opts.group, since: opts.since };
}

export function sourceOf(opts: SourceCliOptions): Promise<RolloutSource> {
  return openSource({ data: opts.data, gateway: opts.gateway, token: opts.token });
}

/** Runs a command's body: a failure is one line on stderr and exit code 1, never a stack trace. */
export async function runCommand(body: () => Promise<number>): Promise<void> {
  let code: number;
  try {
    code = await body();
  } catch (error) {
    console.error(`rlgate: ${(error as Error).message}`);
    if (process.env["RLGATE_DEBUG"]) console.error((error as Error).stack);
    code = EXIT.error;
  }
  process.exitCode = code;
}
