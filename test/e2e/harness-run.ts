// What the end-to-end tests of real harness CLIs share: the local run of a harness (runner/harness-local.ts: clean temp
// dirs and environment, a bounded run in its own process group), the reconstruction of the rollout it made, and what
// a failed assertion shows of a run.
import { fileURLToPath } from "node:url";
import type { CallRecord } from "../../store/records.ts";
import type { CliRun } from "../../runner/harness-local.ts";

export {
  baseEnv,
  harnessDirs,
  killLiveRuns,
  liveRuns,
  runCli,
  type CliRun,
  type HarnessDirs,
} from "../../runner/harness-local.ts";
export { finishAndReconstruct } from "../../cli/harness-check/session-run.ts";
export type { Reconstruction } from "../../cli/harness-check/report.ts";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export { NODE_BIN as BIN } from "../../runner/harness-local.ts";

/** One line per captured call, for failure messages. */
export function describeCalls(calls: readonly CallRecord[]): string {
  return calls
    .map(
      (c) =>
        `#${c.seq} ${c.api} ${c.status} ${c.tokenSource} http=${c.httpStatus} ${c.error ?? ""}${c.warnings ? ` warnings=${c.warnings.length}` : ""}`,
    )
    .join("\n");
}

/** What a failed assertion shows of a run. */
export function describeRun(
  name: string,
  run: CliRun | undefined,
  calls: readonly CallRecord[] | undefined,
  more = "",
): string {
  const tail = (s: string, n: number) => (s.length > n ? `…${s.slice(-n)}` : s);
  return [
    `${name} exit=${run?.code} signal=${run?.signal} timedOut=${run?.timedOut} after ${run?.ms} ms`,
    `--- stdout ---\n${tail(run?.stdout ?? "", 3000)}`,
    `--- stderr ---\n${tail(run?.stderr ?? "", 3000)}`,
    `--- calls (${calls?.length}) ---\n${describeCalls(calls ?? [])}`,
    more,
  ].join("\n");
}
