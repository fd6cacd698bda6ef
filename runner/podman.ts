// One rollout container under podman: the same guarantees as the bubblewrap sandbox (runner/sandbox.ts), from the
// container engine instead of namespaces of our own:
//   --network none                 loopback only; the gateway is a Unix socket bind-mounted in (runner/bridge.ts)
//   --user 1000 --cap-drop all     no capabilities, no_new_privs: a setuid binary in the image gives nothing back
//   --pids-limit, --memory         the cgroup counts every process of the container (not per host uid, as NPROC does)
//   --ulimit data/cpu/core         per process, as in the bubblewrap sandbox (a single greedy process gets ENOMEM)
// and the runner's watchdog reads the container's cgroup: a fork bomb or the memory limit stops it as an infra error.
// Every container also carries its own time limit (--timeout: conmon kills it even when the runner is gone), is removed
// when it exits (--rm) and is labelled with its runner (rlgate.runner=<pid>.<start time>): a starting runner removes
// those of dead runners (runner/podman-reap.ts).
//
// Runtime: runc, when installed. crun (podman's Debian default) refuses a cgroup v1 host whose v2 hierarchy holds a
// controller ("cgroups in hybrid mode not supported"), which is what this project's machines and CI are.
import { execFile, spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RUNNER_LABEL, RUNNER_TAG } from "./podman-runner-id.ts";
import { SandboxError, type SandboxLimits } from "./sandbox.ts";
import { WatchedProcess, type WatchOptions } from "./watched-process.ts";

/** The uid:gid agents and tests run as inside containers (the image's workdir is chowned to it when prepared). */
export const CONTAINER_UID = 1000;

let runtimeChoice: string | undefined;
/** The OCI runtime podman is told to use: RLGATE_PODMAN_RUNTIME, else runc where installed, else podman's default. */
export function podmanRuntime(): string | null {
  if (runtimeChoice !== undefined) return runtimeChoice || null;
  const named = process.env["RLGATE_PODMAN_RUNTIME"];
  runtimeChoice = named ?? (spawnSync("runc", ["--version"]).error ? "" : "runc");
  return runtimeChoice || null;
}

let hardNproc: number | undefined;
/**
 * ulimits every container gets. podman's defaults (nofile 1048576, nproc 4194304) are above what a runner without
 * CAP_SYS_RESOURCE may set, and the container then fails to start: the runner's own hard limits bound them.
 */
export function baseUlimits(): string[] {
  if (hardNproc === undefined) {
    const r = spawnSync("bash", ["-c", "ulimit -Hn; ulimit -Hu"], { encoding: "utf8" });
    const [nofile, nproc] = (r.stdout ?? "").trim().split("\n");
    hardNproc = Math.min(Number(nproc) || 32768, 32768);
    hardNofile = Math.min(Number(nofile) || 4096, 65536);
  }
  // RLIMIT_NPROC counts per host uid, shared by every container of uid 1000: only a backstop; the cgroup is the limit.
  return ["--ulimit", `nofile=${hardNofile}:${hardNofile}`, "--ulimit", `nproc=${hardNproc}:${hardNproc}`];
}
let hardNofile = 4096;

// conmon, which podman leaves watching each container, writes a file named `oom` into its working folder when the
// memory cgroup kills in the container: podman runs from the temporary folder, never from the user's.
const PODMAN_CWD = tmpdir();

/** `podman` with the runtime chosen above; synchronous, for short commands (inspect, commit, rm, build). */
export function podman(args: string[], options: { input?: string; timeoutMs?: number } = {}) {
  const runtime = podmanRuntime();
  const r = spawnSync("podman", [...(runtime ? ["--runtime", runtime] : []), ...args], {
    cwd: PODMAN_CWD,
    encoding: "utf8",
    input: options.input,
    timeout: options.timeoutMs ?? 600_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  return { status: r.status, stdout: r.stdout ?? "", stderr: `${r.stderr ?? ""}${r.error ? r.error.message : ""}` };
}

/**
 * The environment of the `podman run` client: PATH and HOME, and the user's podman configuration (CONTAINERS_CONF,
 * CONTAINERS_STORAGE_CONF, CONTAINERS_REGISTRIES_CONF, … and the XDG folders podman reads its files from), as
 * `podman info` saw it when the backend was probed — else the containers start from other storage than the one
 * checked. The agent's own variables go in by --env, never from here.
 */
export function podmanClientEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const kept = Object.entries(env).filter(
    (e): e is [string, string] =>
      e[1] !== undefined && (/^CONTAINERS_/.test(e[0]) || /^XDG_(CONFIG_HOME|DATA_HOME|RUNTIME_DIR)$/.test(e[0])),
  );
  return { PATH: env["PATH"] ?? "/usr/bin:/bin", HOME: env["HOME"] ?? "/root", ...Object.fromEntries(kept) };
}

/** Null when podman can run containers here, else why not. */
export function podmanUnavailable(): string | null {
  if (spawnSync("podman", ["--version"]).error) return "podman is not installed: apt-get install podman runc";
  // Rootless podman maps the container user to a sub-uid the runner's folders would have to be handed to: not done.
  if (process.getuid?.() !== 0) return "the podman backend runs rootful podman: run rlgate as root";
  const info = podman(["info", "--format", "{{.Host.CgroupsVersion}} {{.Host.OCIRuntime.Name}}"], {
    timeoutMs: 60_000,
  });
  if (info.status !== 0) return `podman cannot start here: ${info.stderr.trim().split("\n").slice(-2).join(" / ")}`;
  return null;
}

export interface Mount {
  type: "bind";
  src: string;
  dest: string;
  rw?: boolean;
}

export interface ContainerSpec {
  name: string;
  /** An image, or `{ rootfs }`: a root folder the runner mounted (runner/podman-storage.ts) — its writes stay there. */
  image: string | { rootfs: string };
  /** The container's own time limit (conmon's): it stops by it even when the runner is dead. */
  timeoutSec: number;
  /** uid:gid, or "0:0" for the grader (which drops to CONTAINER_UID itself). */
  user: string;
  /** Capabilities added back after --cap-drop all (the grader's SETUID/SETGID). */
  caps?: string[];
  workdir: string;
  mounts: Mount[];
  env: Record<string, string>;
  argv: string[];
  limits: SandboxLimits;
}

function mountArg(m: Mount): string {
  // --mount is comma-separated: a comma in a path would split it.
  for (const p of [m.src, m.dest])
    if (/[,\n]/.test(p)) throw new SandboxError(`path not usable in a podman mount (',' or newline): ${p}`);
  return `type=bind,src=${m.src},dst=${m.dest}${m.rw ? "" : ",ro=true"}`;
}

/** Folders that live in memory: their writes count in the memory cgroup (tmpfs pages are charged to the writer). */
export const MEMORY_FOLDERS = ["/tmp", "/var/tmp"];

// cgroup v1 can freeze a container at its memory limit instead of OOM-killing in it (memory.oom_control): the
// watchdog then always sees why it stopped. An OOM kill can end a container (its init killed) before any sample.
const CGROUP_V1_MEMORY = existsSync("/sys/fs/cgroup/memory/memory.limit_in_bytes");

/** The `podman run` arguments of a rollout container (exported for the benchmark and tests). */
export function containerArgs(spec: ContainerSpec): string[] {
  const { processes, memoryBytes, cpuSeconds } = spec.limits;
  const args = [
    "run",
    "--name",
    spec.name,
    "--rm",
    "--timeout",
    String(Math.max(1, Math.ceil(spec.timeoutSec))),
    "--label",
    `${RUNNER_LABEL}=${RUNNER_TAG}`,
    // The container's id names its cgroup: the watchdog reads it here, without a CLI call.
    "--cidfile",
    cidfileOf(spec.name),
    "--network",
    "none",
    "--hostname",
    "sandbox",
    "--user",
    spec.user,
    "--cap-drop",
    "all",
    ...(spec.caps ?? []).flatMap((c) => ["--cap-add", c]),
    "--security-opt",
    "no-new-privileges",
    "--pids-limit",
    String(processes),
    "--memory",
    String(memoryBytes),
    "--memory-swap",
    String(memoryBytes),
    ...(CGROUP_V1_MEMORY ? ["--oom-kill-disable"] : []),
    // In memory, as large as the limit: what is written there is held against --memory with everything else.
    "--shm-size",
    String(memoryBytes),
    ...MEMORY_FOLDERS.flatMap((d) => ["--tmpfs", `${d}:rw,nosuid,nodev,size=${memoryBytes},notmpcopyup`]),
    ...baseUlimits(),
    "--ulimit",
    `data=${memoryBytes}:${memoryBytes}`,
    "--ulimit",
    `cpu=${cpuSeconds}:${cpuSeconds}`,
    "--ulimit",
    "core=0:0",
    "--workdir",
    spec.workdir,
    "--log-driver",
    "none",
  ];
  for (const m of spec.mounts) args.push("--mount", mountArg(m));
  for (const [k, v] of Object.entries(spec.env)) args.push("--env", `${k}=${v}`);
  if (typeof spec.image === "string") args.push(spec.image, ...spec.argv);
  else args.push("--rootfs", spec.image.rootfs, ...spec.argv);
  return args;
}

/** A started container, attached: its output on child.stdout/stderr, its end as a SandboxExit (as Sandbox's). */
export class Container extends WatchedProcess {
  readonly name: string;
  #cgroups: { pids: string; memory: string } | null = null;
  #looking = false;
  readonly #cidfile: string;

  constructor(spec: ContainerSpec, options: WatchOptions) {
    const cidfile = cidfileOf(spec.name);
    rmSync(cidfile, { force: true });
    const runtime = podmanRuntime();
    const child = spawn("podman", [...(runtime ? ["--runtime", runtime] : []), ...containerArgs(spec)], {
      cwd: PODMAN_CWD,
      stdio: ["ignore", "pipe", "pipe"],
      env: podmanClientEnv(),
    });
    super(child, spec.limits, options);
    this.name = spec.name;
    this.#cidfile = cidfile;
    const watch = setInterval(() => this.#check(), WATCH_MS);
    this.watchUntilClosed(() => clearInterval(watch));
  }

  protected override closed(_code: number | null): void {
    rmSync(this.#cidfile, { force: true });
  }

  protected kill(): void {
    // Killing the attached client would leave the container running: the engine is told.
    spawn("podman", ["kill", "--signal", "KILL", this.name], { cwd: PODMAN_CWD, stdio: "ignore" }).on(
      "error",
      () => {},
    );
  }

  #check(): void {
    if (this.stopped) return;
    this.#cgroups ??= cgroupfsOf(this.#cidfile);
    if (!this.#cgroups) {
      if (this.#looking) return;
      this.#looking = true;
      // Asynchronous: the runner's event loop also serves the bridge to the gateway.
      execFile("podman", ["inspect", "--type", "container", "--format", "{{.State.Pid}}", this.name], (error, out) => {
        this.#looking = false;
        if (!error && out.trim() !== "0") this.#cgroups = cgroupsOf(out.trim());
      });
      return;
    }
    const pids = readNumber(`${this.#cgroups.pids}/pids.current`);
    const memory =
      readNumber(`${this.#cgroups.memory}/memory.usage_in_bytes`) ??
      readNumber(`${this.#cgroups.memory}/memory.current`);
    this.sample(pids, memory);
    // The kernel enforces both limits; a container that hits them is stopped rather than left failing or thrashing
    // (or, under cgroup v1, frozen at its memory limit).
    if (atMemoryLimit(this.#cgroups.memory)) this.stop("memory");
    else if (pids !== null && pids >= this.limits.processes) this.stop("processes");
  }
}

const WATCH_MS = 500;

function cidfileOf(name: string): string {
  return join(tmpdir(), `rlgate-${name}.cid`);
}

function readNumber(path: string): number | null {
  try {
    const n = Number(readFileSync(path, "utf8").trim());
    return Number.isFinite(n) ? n : null;
  } catch {
    return null;
  }
}

/** Whether the container's memory cgroup is frozen at its limit (v1: under_oom) or killed in it (v1, v2: oom_kill). */
function atMemoryLimit(memoryDir: string): boolean {
  for (const file of ["memory.oom_control", "memory.events"]) {
    try {
      const text = readFileSync(`${memoryDir}/${file}`, "utf8");
      return /^(under_oom|oom_kill) [1-9]/m.test(text);
    } catch {
      /* not this cgroup version */
    }
  }
  return false;
}

/** podman's cgroupfs layout (its cgroup manager where systemd does not run, as in containers and CI): no CLI call. */
function cgroupfsOf(cidfile: string): { pids: string; memory: string } | null {
  let id: string;
  try {
    id = readFileSync(cidfile, "utf8").trim();
  } catch {
    return null;
  }
  for (const [pids, memory] of [
    [`/sys/fs/cgroup/pids/libpod_parent/libpod-${id}`, `/sys/fs/cgroup/memory/libpod_parent/libpod-${id}`],
    [`/sys/fs/cgroup/libpod_parent/libpod-${id}`, `/sys/fs/cgroup/libpod_parent/libpod-${id}`],
  ] as const)
    if (existsSync(pids) && existsSync(memory)) return { pids, memory };
  return null;
}

/** The pids and memory cgroup folders of a container's init process (cgroup v1 or v2), from /proc. */
function cgroupsOf(pid: string): { pids: string; memory: string } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/cgroup`, "utf8");
  } catch {
    return null;
  }
  const found: Record<string, string> = {};
  for (const line of text.trim().split("\n")) {
    const [, controllers, path] = line.split(":");
    for (const c of (controllers ?? "").split(",")) {
      const key = c === "" ? "unified" : c;
      const base = key === "unified" ? "/sys/fs/cgroup" : `/sys/fs/cgroup/${key}`;
      if (existsSync(`${base}${path}`)) found[key] = `${base}${path}`;
    }
  }
  const pids = found["pids"] ?? found["unified"];
  const memory = found["memory"] ?? found["unified"];
  return pids && memory ? { pids, memory } : null;
}

/**
 * Mounts an image on the host until unmountImage and returns its root folder, which graders bind read-only. Not a
 * `--mount type=image` per container: podman unmounts the image when any container that mounted it is cleaned up, and
 * a grader starting from the same image at that moment fails (runc: the overlay's lower folder is gone).
 */
export function mountImage(tag: string): string {
  const r = podman(["image", "mount", tag], { timeoutMs: 120_000 });
  if (r.status !== 0) throw new SandboxError(`mounting the image ${tag} failed: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

/** Releases one mountImage (podman counts them); never throws. */
export function unmountImage(tag: string): void {
  podman(["image", "unmount", tag], { timeoutMs: 60_000 });
}

/** Hands a folder the runner made to the container user (bind-mounted read-write, e.g. the harness's home). */
export function chownTree(dir: string): void {
  spawnSync("chown", ["-R", `${CONTAINER_UID}:${CONTAINER_UID}`, dir]);
}

const removed = new Set<string>();
const releases = new Map<string, () => void>();

/** What to release with a container's removal (its rollout's mounts, runner/podman-storage.ts): once. */
export function releaseWith(name: string, release: () => void): void {
  releases.set(name, release);
}

/** Removes containers and images a rollout made, and releases what goes with them; never throws (what is already
 * gone is fine). */
export function removeContainers(all: string[], images: string[] = []): void {
  for (const n of all) {
    const release = releases.get(n);
    releases.delete(n);
    release?.();
  }
  // Each name once: the grade stage removes the agent's container early, the rollout's cleanup then has nothing to do.
  const names = all.filter((n) => !removed.has(n));
  for (const n of names) removed.add(n);
  if (removed.size > 10_000) removed.clear();
  if (names.length) podman(["rm", "--force", "--time", "0", "--ignore", ...names], { timeoutMs: 60_000 });
  if (images.length) podman(["rmi", "--force", "--ignore", ...images], { timeoutMs: 60_000 });
}
