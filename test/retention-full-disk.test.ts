// Serving resumes after retention frees space: a store that filled its filesystem (a 16 MiB tmpfs a test-made mount
// namespace holds, as test/full-disk.test.ts makes it) refuses calls with RLGATE_STORE_FULL while its core holds every
// rollout; once the core acknowledges them, `serve --retain 1s` removes them and the gateway records calls again in
// the pages LMDB reuses — with the filler file still there, so nothing else made room.
// test/reliability/retention-full-disk-run.ts does it inside the namespace and reports what it found.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { after, test } from "node:test";
import { ROOT, tempDir } from "./helpers.ts";

const TMPFS_BYTES = 16 * 1024 * 1024;
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tmpfsUnavailable(): string | null {
  const dir = tempDir("tmpfs-probe");
  dirs.push(dir);
  const probe = spawnSync("bwrap", ["--dev-bind", "/", "/", "--size", "1048576", "--tmpfs", dir, "true"], {
    encoding: "utf8",
  });
  if (probe.error) return `bwrap is not available: ${probe.error.message}`;
  if (probe.status !== 0) return `bwrap cannot mount a tmpfs here: ${probe.stderr.trim()}`;
  return null;
}

interface Result {
  finishedBeforeFull: number;
  refused: number;
  otherErrors: string[];
  freeAfterFill: number;
  refusedBeforeAck: number | null;
  resumed: boolean;
  removedLogLines: number;
  recordedAfter: Array<{ rollout: string; seq: number }>;
  missingAfterReopen: string[];
  unhandled: string[];
  error: string | null;
}

const skip = tmpfsUnavailable();

test(
  "a full store refuses calls until its core acknowledges and retention frees space; then it records again",
  {
    skip: skip ?? false,
    timeout: 600_000,
  },
  async () => {
    const dir = tempDir("retention-full-disk");
    dirs.push(dir);
    const child = spawn(
      "bwrap",
      [
        ...["--dev-bind", "/", "/", "--size", String(TMPFS_BYTES), "--tmpfs", dir, "--die-with-parent", "--"],
        ...[process.execPath, "--import", "tsx", "test/reliability/retention-full-disk-run.ts", dir],
      ],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    await new Promise((resolve) => child.on("close", resolve));
    const line = output.split("\n").find((l) => l.startsWith("RETENTION-FULL-DISK-RESULT "));
    assert.ok(line, `no result from the run:\n${output.slice(-6000)}`);
    const r = JSON.parse(line.slice("RETENTION-FULL-DISK-RESULT ".length)) as Result;
    const seen = JSON.stringify(r, null, 2);
    assert.equal(r.error, null, seen);
    assert.ok(r.finishedBeforeFull > 0 && r.refused > 0, `the store filled and refused: ${seen}`);
    assert.deepEqual(r.otherErrors, [], seen);
    assert.equal(r.refusedBeforeAck, 507, `still refused while the core held everything: ${seen}`);
    assert.ok(r.resumed && r.recordedAfter.length > 0, seen);
    assert.ok(r.removedLogLines > 0, `retention removed rollouts: ${seen}`);
    assert.deepEqual(r.missingAfterReopen, [], seen);
    assert.deepEqual(r.unhandled, [], seen);
  },
);
