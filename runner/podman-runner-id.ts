// Who made a container or a mount: the runner's pid and its start time (clock ticks since boot, /proc/PID/stat's
// 22nd field). The start time tells a live runner from a new process that was given a dead runner's pid.
import { readFileSync } from "node:fs";

/** The start time of a process, or null when there is no such process. */
export function startTimeOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}

/** This runner: `<pid>.<start time>`, the value of the rlgate.runner label and the name of its mount folders. */
export const RUNNER_TAG = `${process.pid}.${startTimeOf(process.pid) ?? "0"}`;

/** The label every container the runner makes carries (`podman ps --filter label=…` finds them). */
export const RUNNER_LABEL = "rlgate.runner";

/** Whether the runner a tag names still runs. */
export function runnerAlive(tag: string): boolean {
  const [pid, start] = tag.split(".");
  if (!pid || !/^\d+$/.test(pid)) return false;
  return startTimeOf(Number(pid)) === start;
}
