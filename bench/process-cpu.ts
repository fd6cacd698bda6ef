// CPU time of a process read from /proc per thread, in nanoseconds (schedstat: the time each thread ran), where
// /proc/PID/stat counts 10 ms ticks: a block of 300 calls at ~1 ms a call is only 30 of them.
import { readdirSync, readFileSync } from "node:fs";

/** CPU ms each live thread of `pid` has run so far, the main thread as "main"; empty where /proc is not there. */
export function threadCpuMs(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const ranNs = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      out.set(tid === String(pid) ? "main" : tid, ranNs / 1e6);
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return out;
}

/** CPU seconds `pid`'s threads have run so far (threads that ended are not counted); null without /proc. */
export function processCpuSeconds(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  const threads = threadCpuMs(pid);
  if (threads.size === 0) return null;
  let ms = 0;
  for (const value of threads.values()) ms += value;
  return ms / 1000;
}
