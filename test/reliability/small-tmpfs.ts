// A store on a small filesystem, for the full-disk tests: the test side mounts a tmpfs of a set size in a mount
// namespace of its own (bwrap, no host root needed) and runs a script inside it that prints one marked JSON line; the
// script side fills that filesystem and talks to the gateway it serves from it.
import { spawn, spawnSync } from "node:child_process";
import { closeSync, openSync, statfsSync, writeSync } from "node:fs";
import { ROOT, tempDir } from "../helpers.ts";
import { requireInCi } from "../require-in-ci.ts";

/**
 * Why a tmpfs cannot be mounted here without root (the tests are then skipped), or null; its probe folder goes in
 * `dirs`. A missing bwrap fails in CI, which installs it; a kernel that refuses the mount namespace stays a skip.
 */
export function tmpfsUnavailable(dirs: string[]): string | null {
  const dir = tempDir("tmpfs-probe");
  dirs.push(dir);
  const probe = spawnSync("bwrap", ["--dev-bind", "/", "/", "--size", "1048576", "--tmpfs", dir, "true"], {
    encoding: "utf8",
  });
  if (probe.error) return requireInCi("bubblewrap", `bwrap is not available: ${probe.error.message}`) || null;
  if (probe.status !== 0) return `bwrap cannot mount a tmpfs here: ${probe.stderr.trim()}`;
  return null;
}

/**
 * Runs `node --import tsx SCRIPT DIR ARGS…` with a tmpfs of `bytes` mounted on DIR, and resolves with the JSON of its
 * line that starts with `marker ` (null when there is none) and everything it printed.
 */
export function runInTmpfs<T>(o: {
  dir: string;
  bytes: number;
  script: string;
  args?: string[];
  marker: string;
}): Promise<{ result: T | null; output: string }> {
  const child = spawn(
    "bwrap",
    [
      ...["--dev-bind", "/", "/", "--size", String(o.bytes), "--tmpfs", o.dir, "--die-with-parent", "--"],
      ...[process.execPath, "--import", "tsx", o.script, o.dir, ...(o.args ?? [])],
    ],
    { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve) =>
    child.on("close", () => {
      const line = output.split("\n").find((l) => l.startsWith(`${o.marker} `));
      resolve({ result: line ? (JSON.parse(line.slice(o.marker.length + 1)) as T) : null, output });
    }),
  );
}

/** Bytes an unprivileged writer may still write on the filesystem of `dir`. */
export function freeBytes(dir: string): number {
  const s = statfsSync(dir);
  return Number(s.bavail) * Number(s.bsize);
}

/** Writes `file` until the filesystem of `dir` has no more than `room` bytes (and a chunk) left. */
export function fillFilesystem(file: string, dir: string, room: number): void {
  const fd = openSync(file, "w");
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    while (freeBytes(dir) > room + chunk.length) writeSync(fd, chunk);
  } finally {
    closeSync(fd);
  }
}

export interface Answer {
  status: number;
  text: string;
  /** The call's number (x-rlgate-call), NaN when there is none. */
  seq: number;
}

/** A JSON POST's answer; status 0 when the connection was cut before a whole answer (its error as the text). */
export async function postAnswer(url: string, body: unknown): Promise<Answer> {
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    });
    return { status: res.status, text: await res.text(), seq: Number(res.headers.get("x-rlgate-call")) };
  } catch (error) {
    return { status: 0, text: String((error as Error).cause ?? error), seq: NaN };
  }
}
