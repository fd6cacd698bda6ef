// Serving resumes after retention frees space: a store that filled its filesystem (a 16 MiB tmpfs a test-made mount
// namespace holds, as test/full-disk.test.ts makes it) refuses calls with RLGATE_STORE_FULL while its core holds every
// rollout; once the core acknowledges them, `serve --retain 1s` removes them and the gateway records calls again in
// the pages LMDB reuses — with the filler file still there, so nothing else made room.
// test/reliability/retention-full-disk-run.ts does it inside the namespace and reports what it found.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, test } from "node:test";
import { tempDir } from "./helpers.ts";
import { runInTmpfs, tmpfsUnavailable } from "./reliability/small-tmpfs.ts";

const TMPFS_BYTES = 16 * 1024 * 1024;
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

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

const skip = tmpfsUnavailable(dirs);

test(
  "a full store refuses calls until its core acknowledges and retention frees space; then it records again",
  {
    skip: skip ?? false,
    timeout: 600_000,
  },
  async () => {
    const dir = tempDir("retention-full-disk");
    dirs.push(dir);
    const { result: r, output } = await runInTmpfs<Result>({
      dir,
      bytes: TMPFS_BYTES,
      script: "test/reliability/retention-full-disk-run.ts",
      marker: "RETENTION-FULL-DISK-RESULT",
    });
    assert.ok(r, `no result from the run:\n${output.slice(-6000)}`);
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
