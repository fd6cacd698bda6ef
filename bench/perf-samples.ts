// Reads `perf script` text (fields comm,pid,tid,time,period,event,ip,sym,dso; call graphs) for bench/perf-steps.ts:
// splits it into samples and says where each one is charged.
import { relative } from "node:path";

export interface Sample {
  thread: string;
  tid: string;
  /** `ADDRESS SYMBOL (DSO)`, innermost first. */
  frames: string[];
}

/** Splits `perf script` output into samples: the thread's name and id, its frames innermost first. */
export function* samples(text: string): Generator<Sample> {
  for (const block of text.split("\n\n")) {
    const lines = block.split("\n").filter((l) => l.trim().length > 0);
    // "node  2874/2874   1436.171548:     500000 cpu-clock: " — a thread's name may hold spaces.
    const head = /^\s*(.*?)\s+(\d+)\/(\d+)\s+[\d.]+:/.exec(lines[0] ?? "");
    if (!head) continue;
    yield { thread: head[1]!, tid: head[3]!, frames: lines.slice(1).map((l) => l.trim()) };
  }
}

const KERNEL = "([kernel.kallsyms])";

/**
 * Where a sample is charged: `kernel: CALL` inside a system call; else the file of the innermost JavaScript frame (what
 * builtins, addons and page faults run for it count to it), shortened to the package under node_modules or the path
 * under `root`; else `native: LIBRARY`. Samples of other threads than the main one are prefixed `other threads · `.
 */
export function placeOf(mainThread: boolean, frames: readonly string[], root: string): string {
  const place = syscallOf(frames) ?? jsPlaceOf(frames, root) ?? nativeOf(frames[0]);
  return mainThread ? place : `other threads · ${place}`;
}

function syscallOf(frames: readonly string[]): string | null {
  let inKernel = 0;
  while (frames[inKernel]?.endsWith(KERNEL)) inKernel++;
  // Without the system call entry it is an interrupt or a page fault taken by user code: charged to that code.
  if (!frames.slice(0, inKernel).some((f) => /\sentry_SYSCALL/.test(f))) return null;
  for (const frame of frames.slice(0, inKernel)) {
    const entry = /\s__(?:x64|ia32)_sys_(\w+)/.exec(frame);
    if (entry) return `kernel: ${entry[1]}`;
  }
  // A sample taken while the call reschedules has no entry point in its stack: the libc function that made it names it.
  const wrapper = /^\S+\s+(\S+)/.exec(frames[inKernel] ?? "")?.[1] ?? "?";
  return `kernel: ${wrapper.replace(/^(?:__GI_)?_*(?:libc_)?/, "")}`;
}

function jsPlaceOf(frames: readonly string[], root: string): string | null {
  for (const frame of frames) {
    // "7f4b200c957b JS:*writevGeneric node:internal/stream_base_commons:123:23 (/tmp/perf-2874.map)"
    const js = /\s(?:JS|LazyCompile|Function):[*~^]?\S* (?:file:\/\/)?(\S+?)(?::\d+)*\s\(/.exec(frame);
    if (!js) continue;
    const path = js[1]!;
    const modules = path.lastIndexOf("node_modules/");
    if (modules >= 0) {
      const parts = path.slice(modules).split("/");
      return parts.slice(0, parts[1]!.startsWith("@") ? 3 : 2).join("/");
    }
    return path.startsWith("/") ? relative(root, path) : path;
  }
  return null;
}

function nativeOf(frame: string | undefined): string {
  const dso = /\(([^()]+)\)$/.exec(frame ?? "");
  return dso ? `native: ${dso[1]!.split("/").pop()}` : "unknown";
}
