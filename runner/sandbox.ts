// One bubblewrap sandbox: a workspace that is an overlay over read-only layers, its own user, pid, ipc, uts and network
// namespaces (the network one holds only loopback), resource limits, and a watchdog that stops it when it goes past them.
//
// bubblewrap 0.8 (Debian 12) cannot mount overlays, so the chain is:
//   [setpriv to an unprivileged uid, when rlgate runs as root]
//   → unshare --user --map-root-user --mount --ipc (user, mount and IPC namespaces of our own: overlayfs may be
//                                                 mounted there, SysV shared memory bounded)
//   → mount -t overlay … (userxattr)            (only this namespace sees the merged workspace)
//   → exec bwrap --unshare-user-try --unshare-pid --unshare-net …  (the agent's sandbox: no capabilities,
//                                                 no_new_privs, loopback only)
//   → prlimit --nproc --as --cpu -- COMMAND     (limits set inside the sandbox's own user namespace)
// Every exec keeps the pid, so the pid node spawns is bwrap's: killing it kills the sandbox (its pid namespace dies).
import { spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statfsSync,
} from "node:fs";
import { join } from "node:path";
import { diskUsage } from "./disk-usage.ts";
import { WatchedProcess, type WatchOptions } from "./watched-process.ts";

export class SandboxError extends Error {
  readonly code = "RLGATE_SANDBOX";
}

export interface SandboxLimits {
  /** Processes (and threads) the sandbox may hold at once: RLIMIT_NPROC in its own user namespace. */
  processes: number;
  /** Resident memory of all its processes together plus what its in-RAM folders hold (watchdog; each of those
   * folders is also a tmpfs of this size), and each process's data segment (RLIMIT_DATA; not
   * RLIMIT_AS, which breaks Node: WebAssembly reserves ~10 GiB of address space, and every harness CLI is Node). */
  memoryBytes: number;
  /** CPU seconds per process (RLIMIT_CPU: SIGXCPU, then SIGKILL). */
  cpuSeconds: number;
  /** Bytes the sandbox may write to disk in all (workspace, its root, home); none: no limit. */
  diskBytes?: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  processes: 512,
  memoryBytes: 4 * 1024 ** 3,
  cpuSeconds: 3600,
  diskBytes: 2 * 1024 ** 3,
};

export interface Bind {
  src: string;
  dest: string;
  rw?: boolean;
}

export interface SandboxSpec {
  /** Read-only overlay layers, top first; the merged view is /workspace inside. */
  lower: string[];
  /** Overlay upper and work directories (same filesystem), and an empty directory to mount the overlay on. */
  upper: string;
  work: string;
  mountpoint: string;
  /** A tmpfs of this size mounted on `dir` in the sandbox's namespace before the overlay, holding `upper` and `work`:
   * a writable layer that is thrown away with the sandbox (grading's). */
  scratch?: { dir: string; bytes: number };
  /** Folders on the host's disk the watchdog measures against `bytes` (a disk quota without a filesystem of its own). */
  diskWatch?: { dirs: string[]; bytes: number };
  binds: Bind[];
  env: Record<string, string>;
  argv: string[];
  limits: SandboxLimits;
}

export const WORKSPACE = "/workspace";
/** tmpfs folders of a sandbox: what is written there is held in RAM, so it counts as the sandbox's memory. */
export const IN_RAM = ["/tmp", "/dev/shm"];
const SANDBOX_UID = 1000;
/** The unprivileged host uid sandboxes run as when rlgate runs as root (a root kuid is exempt from RLIMIT_NPROC). */
export const SANDBOX_HOST_UID = Number(process.env["RLGATE_SANDBOX_UID"] ?? 65534);
const RUNNING_AS_ROOT = process.getuid?.() === 0;

export interface SandboxExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Why the runner stopped it, if it did. */
  stopped: "timeout" | "memory" | "processes" | "disk" | "aborted" | null;
  peakProcesses: number;
  peakMemoryBytes: number;
  ms: number;
  /** Why the sandbox's first process could not be spawned at all. */
  startError: string | null;
}

/** Directories the runner creates for a sandbox belong to the uid the sandbox runs as. */
export function ownForSandbox(path: string): void {
  if (RUNNING_AS_ROOT) chownSync(path, SANDBOX_HOST_UID, SANDBOX_HOST_UID);
}

export function ownTreeForSandbox(dir: string): void {
  if (!RUNNING_AS_ROOT) return;
  ownForSandbox(dir);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) ownTreeForSandbox(join(dir, e.name));
    else ownForSandbox(join(dir, e.name));
  }
}

function systemBinds(): string[] {
  const args: string[] = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"];
  for (const dir of ["/bin", "/sbin", "/lib", "/lib64", "/lib32"]) {
    if (!existsSync(dir)) continue;
    const st = lstatSync(dir);
    // Merged /usr: /bin → usr/bin stays a symlink inside.
    if (st.isSymbolicLink()) args.push("--symlink", `usr${dir}`, dir);
    else args.push("--ro-bind", dir, dir);
  }
  return args;
}

function bwrapArgs(spec: SandboxSpec): string[] {
  const args = [
    // --unshare-all but IPC: the sandbox keeps the IPC namespace the chain made, where SysV shared memory is bounded.
    "--unshare-user-try",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--uid",
    String(SANDBOX_UID),
    "--gid",
    String(SANDBOX_UID),
    "--hostname",
    "sandbox",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
    ...systemBinds(),
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    // The in-RAM folders a sandbox may write: each at most the memory limit, and the watchdog counts what they hold.
    ...IN_RAM.flatMap((dir) => ["--size", String(spec.limits.memoryBytes), "--tmpfs", dir]),
    "--bind",
    spec.mountpoint,
    WORKSPACE,
  ];
  for (const b of spec.binds) args.push(b.rw ? "--bind" : "--ro-bind", b.src, b.dest);
  // bwrap's own root and /dev are tmpfs of no set size, writable by the sandbox's user: read-only, nothing lands in
  // RAM outside the counted folders (the mounts on them, /tmp and /dev/shm among them, stay as they are).
  args.push("--remount-ro", "/dev", "--remount-ro", "/");
  for (const [k, v] of Object.entries(spec.env)) args.push("--setenv", k, v);
  args.push("--chdir", WORKSPACE, "--");
  const { processes, memoryBytes, cpuSeconds } = spec.limits;
  args.push(
    "prlimit",
    `--nproc=${processes}`,
    `--data=${memoryBytes}`,
    `--cpu=${cpuSeconds}`,
    "--core=0",
    "--",
    ...spec.argv,
  );
  return args;
}

/** The command line that starts a sandbox (exported for the benchmark and for error messages). */
export function sandboxCommand(spec: SandboxSpec): string[] {
  const options = `lowerdir=${[...spec.lower].join(":")},upperdir=${spec.upper},workdir=${spec.work},userxattr`;
  for (const p of [...spec.lower, spec.upper, spec.work, spec.mountpoint]) {
    // overlayfs options are comma- and colon-separated.
    if (/[,:\s]/.test(p)) throw new SandboxError(`path not usable in an overlay mount (',', ':' or blank): ${p}`);
  }
  const script = [
    // SysV shared memory is held in RAM by no process and in no file system the watchdog reads: bounded instead, in
    // the sandbox's own IPC namespace, to the memory limit (in pages; kernels that refuse it keep their default).
    `echo ${Math.ceil(spec.limits.memoryBytes / PAGE)} > /proc/sys/kernel/shmall 2>/dev/null`,
    'if [ -n "$3" ]; then mount -t tmpfs -o "size=$4,mode=0755" rlgate-scratch "$3" && mkdir -p "$5" "$6" || exit 125; fi',
    'mount -t overlay rlgate-workspace -o "$1" "$2" || exit 125',
    'shift 6; exec bwrap "$@"',
  ].join("\n");
  const scratch = spec.scratch
    ? [spec.scratch.dir, String(spec.scratch.bytes), spec.upper, spec.work]
    : ["", "", "", ""];
  const chain = [
    "unshare",
    "--user",
    "--map-root-user",
    "--mount",
    "--ipc",
    "--propagation",
    "private",
    "bash",
    "-c",
    script,
    "sandbox",
    options,
    spec.mountpoint,
    ...scratch,
    ...bwrapArgs(spec),
  ];
  if (!RUNNING_AS_ROOT) return chain;
  const id = String(SANDBOX_HOST_UID);
  return ["setpriv", `--reuid=${id}`, `--regid=${id}`, "--clear-groups", ...chain];
}

/** Exit code of the chain when the overlay could not be mounted (before anything of the task ran). */
export const MOUNT_FAILED = 125;

export class Sandbox extends WatchedProcess {
  constructor(spec: SandboxSpec, options: WatchOptions) {
    for (const dir of spec.scratch ? [spec.scratch.dir, spec.mountpoint] : [spec.upper, spec.work, spec.mountpoint]) {
      mkdirSync(dir, { recursive: true });
      ownForSandbox(dir);
    }
    const [cmd, ...args] = sandboxCommand(spec);
    const child = spawn(cmd!, args, {
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
    });
    super(child, spec.limits, options);
    this.#diskWatch = spec.diskWatch ?? null;
    watched.add(this);
    watch ??= setInterval(scanAll, WATCH_MS);
    this.watchUntilClosed(() => {
      watched.delete(this);
      if (watched.size === 0 && watch) {
        clearInterval(watch);
        watch = null;
      }
    });
  }

  readonly #diskWatch: SandboxSpec["diskWatch"] | null;
  #diskTick = 0;
  #measuring = false;

  /** Every DISK_EVERY ticks, one du at a time: a tree of many files takes a while to walk. */
  #checkDisk(): void {
    const w = this.#diskWatch;
    if (!w || this.#measuring || this.#diskTick++ % DISK_EVERY !== 0) return;
    this.#measuring = true;
    void diskUsage(w.dirs).then((bytes) => {
      this.#measuring = false;
      if (bytes > w.bytes) this.stop("disk");
    });
  }

  /** bwrap's child: pid 1 of the sandbox, whose /proc/PID/root is the sandbox's own root (its /tmp, its /dev/shm). */
  #inside: number | null = null;

  /**
   * What the sandbox's tmpfs folders hold (0 where /proc/PID/root cannot be read). A folder counts only once it is
   * the tmpfs of the size given here: before bwrap has set up its root, /proc/PID/root/tmp is the host's /tmp.
   */
  #inRamBytes(table: ProcessTable, pid: number): number {
    const size = Math.ceil(this.limits.memoryBytes / PAGE) * PAGE;
    const held = (inside: number): number | null => {
      let bytes = 0;
      for (const dir of IN_RAM) {
        try {
          const fs = statfsSync(`/proc/${inside}/root${dir}`);
          if (fs.blocks * fs.bsize !== size) return null;
          bytes += (fs.blocks - fs.bfree) * fs.bsize;
        } catch {
          return null;
        }
      }
      return bytes;
    };
    if (this.#inside !== null) return held(this.#inside) ?? 0;
    for (const child of table.children.get(pid) ?? []) {
      const bytes = held(child);
      if (bytes === null) continue;
      this.#inside = child;
      return bytes;
    }
    return 0;
  }

  protected kill(): void {
    const pid = this.child.pid;
    if (pid === undefined) return;
    // bwrap's death takes its pid namespace with it (--die-with-parent on its init); the group catches stragglers.
    for (const target of [-pid, pid]) {
      try {
        process.kill(target, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
  }

  /** Called by the watchdog with the machine's process table. */
  check(table: ProcessTable): void {
    const pid = this.child.pid;
    if (pid === undefined || this.stopped) return;
    const { processes, rssBytes } = treeUsage(table, pid);
    const memory = rssBytes + this.#inRamBytes(table, pid);
    this.sample(processes, memory);
    if (memory > this.limits.memoryBytes) this.stop("memory");
    // RLIMIT_NPROC makes fork fail at the limit: a sandbox that reaches it is stopped rather than left spinning.
    else if (processes >= this.limits.processes) this.stop("processes");
    else this.#checkDisk();
  }
}

// The watchdog: one scan of /proc per tick serves every running sandbox.
const WATCH_MS = 500;
const DISK_EVERY = 4;
const watched = new Set<Sandbox>();
let watch: NodeJS.Timeout | null = null;

function scanAll(): void {
  const table = processTable();
  for (const box of watched) box.check(table);
}

const PAGE = 4096;

export interface ProcessTable {
  children: Map<number, number[]>;
  info: Map<number, { threads: number; rss: number }>;
}

/** Every process's parent, threads and resident bytes, from /proc (no /proc/PID/task/TID/children: not every kernel has it). */
export function processTable(): ProcessTable {
  const children = new Map<number, number[]>();
  const info = new Map<number, { threads: number; rss: number }>();
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return { children, info };
  }
  for (const name of entries) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "latin1");
    } catch {
      continue;
    }
    // The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const pid = Number(name);
    const ppid = Number(fields[1]);
    info.set(pid, { threads: Number(fields[17]) || 1, rss: (Number(fields[21]) || 0) * PAGE });
    const list = children.get(ppid);
    if (list) list.push(pid);
    else children.set(ppid, [pid]);
  }
  return { children, info };
}

/** Processes (threads counted, as RLIMIT_NPROC counts them) and resident bytes of a process and its descendants. */
export function treeUsage({ children, info }: ProcessTable, root: number): { processes: number; rssBytes: number } {
  let processes = 0;
  let rssBytes = 0;
  const stack = [root];
  while (stack.length) {
    const pid = stack.pop()!;
    const i = info.get(pid);
    if (i) {
      processes += i.threads;
      rssBytes += i.rss;
    }
    stack.push(...(children.get(pid) ?? []));
  }
  return { processes, rssBytes };
}

/**
 * Removes a folder sandboxes wrote to. What an agent left unreadable (chmod 000) cannot be listed by a runner that is
 * not root: permissions are given back first. Never throws: returns what went wrong.
 */
export function removeSandboxFolder(dir: string): string | null {
  try {
    rmSync(dir, { recursive: true, force: true });
    return null;
  } catch {
    spawnSync("chmod", ["-R", "u+rwX", dir]);
    try {
      rmSync(dir, { recursive: true, force: true });
      return null;
    } catch (error) {
      return `cannot remove ${dir}: ${(error as Error).message}`;
    }
  }
}

/** Null when sandboxes can start here, else why not (bwrap missing, user namespaces refused, no overlayfs). */
export function sandboxUnavailable(scratch: string): string | null {
  const which = spawnSync("bwrap", ["--version"], { encoding: "utf8" });
  if (which.error) return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap";
  for (const tool of ["unshare", "prlimit", ...(RUNNING_AS_ROOT ? ["setpriv"] : [])]) {
    if (spawnSync(tool, ["--version"]).error) return `${tool} (util-linux) is not installed`;
  }
  mkdirSync(scratch, { recursive: true });
  // The sandbox's user (an unprivileged one when rlgate runs as root) must be able to walk in.
  chmodSync(scratch, 0o711);
  const dirs = {
    lower: `${scratch}/probe-lower`,
    upper: `${scratch}/probe-upper`,
    work: `${scratch}/probe-work`,
    mnt: `${scratch}/probe-mnt`,
  };
  try {
    for (const d of Object.values(dirs)) {
      mkdirSync(d, { recursive: true });
      ownForSandbox(d);
    }
  } catch (error) {
    // Root in a user namespace that maps no other uid (a rootless container) cannot hand a directory to the sandbox's.
    return `the sandbox's user (uid ${SANDBOX_HOST_UID}, RLGATE_SANDBOX_UID) cannot own its directories here: ${(error as Error).message}`;
  }
  const spec: SandboxSpec = {
    lower: [dirs.lower],
    upper: dirs.upper,
    work: dirs.work,
    mountpoint: dirs.mnt,
    binds: [],
    env: {},
    argv: ["true"],
    limits: DEFAULT_LIMITS,
  };
  const [cmd, ...args] = sandboxCommand(spec);
  const r = spawnSync(cmd!, args, { encoding: "utf8", timeout: 30_000 });
  if (r.status === 0) return null;
  const why = `${r.stderr ?? ""}${r.error?.message ?? ""}`.trim().split("\n").slice(-3).join(" / ");
  return r.status === MOUNT_FAILED
    ? `overlayfs cannot be mounted in an unprivileged user namespace here (kernel < 5.11?): ${why}`
    : `bubblewrap cannot create a sandbox here (unprivileged user namespaces disabled?): ${why}`;
}
