// A full disk refuses calls, it never crashes (docs/design: failure rules). The store sits on a 16 MiB tmpfs that a
// test-made mount namespace holds (bwrap, no host root needed); test/reliability/full-disk-run.ts fills it, and this
// checks what it found, for a single-process gateway and for two workers: writes refused with 507 RLGATE_STORE_FULL in
// each API's own error shape, the gateway alive and healthy, the state logged once per process, no unhandled
// rejection, serving resumed once space was freed, and everything acknowledged read back from the reopened store.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, test } from "node:test";
import { tempDir } from "./helpers.ts";
import { runInTmpfs, tmpfsUnavailable } from "./reliability/small-tmpfs.ts";

const TMPFS_BYTES = 16 * 1024 * 1024;
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface FullDiskResult {
  workers: number;
  acknowledgedCalls: number;
  acknowledgedFinishes: number;
  refusedCalls: number;
  refusedFinishes: number;
  refusedCreates: number;
  otherErrors: string[];
  cut: string[];
  checks: {
    whileFull: Record<"chat" | "messages" | "finish" | "create", { status: number; body: any }> & {
      healthz: number;
      alive: boolean[];
    };
    afterSpaceReturns: { finish: number; create: number };
  };
  missingAfterReopen: string[];
  fullLogLines: number;
  resumeLogLines: number;
  unhandled: string[];
  exit: string | null;
}

function runFullDisk(workers: number, reserve: number): Promise<{ result: FullDiskResult | null; output: string }> {
  const dir = tempDir("full-disk");
  dirs.push(dir);
  return runInTmpfs<FullDiskResult>({
    dir,
    bytes: TMPFS_BYTES,
    script: "test/reliability/full-disk-run.ts",
    args: [String(workers), String(reserve)],
    marker: "FULL-DISK-RESULT",
  });
}

const skip = tmpfsUnavailable(dirs);

describe("a full disk under the store", { skip: skip ?? false }, () => {
  // With a reserve (the default's way): refused before the filesystem runs out. Without one: every write runs until one
  // fails with ENOSPC, the path each write takes when the reserve is not enough (a single-process gateway died there
  // with SIGBUS through LMDB's write map).
  for (const [workers, reserve] of [
    [1, 256 * 1024],
    [2, 256 * 1024],
    [1, 0],
    [2, 0],
  ] as const) {
    test(
      `--workers ${workers}, --store-reserve ${reserve}: refused with RLGATE_STORE_FULL, no crash, resumes, nothing acknowledged lost`,
      {
        timeout: 600_000,
      },
      async () => {
        const { result, output } = await runFullDisk(workers, reserve);
        assert.ok(result, `no result from the run:\n${output.slice(-6000)}`);
        const full = result.checks.whileFull;
        assert.deepEqual(result.otherErrors, [], "answers other than 200 or 507");
        // With a reserve, calls admitted before the store filled are committed into it: none is cut. Without one, a call
        // whose own commit found the disk full is cut (its harness never saw it complete; nothing of it is stored).
        if (reserve > 0) assert.deepEqual(result.cut, [], "answers cut short");
        assert.ok(result.refusedCalls + result.refusedCreates + result.refusedFinishes >= 8, "the load was refused");
        assert.equal(full.chat.status, 507);
        assert.equal(full.chat.body.error.code, "RLGATE_STORE_FULL");
        assert.match(full.chat.body.error.message, /store's disk is full: .*full-disk.*\/store has \d+ bytes free/);
        assert.equal(full.messages.status, 507);
        assert.equal(full.messages.body.type, "error"); // Anthropic's shape on /v1/messages
        assert.match(full.messages.body.error.message, /store's disk is full/);
        assert.equal(full.finish.status, 507);
        assert.equal(full.finish.body.error.code, "RLGATE_STORE_FULL");
        assert.equal(full.create.status, 507);
        assert.equal(full.healthz, 200);
        assert.ok(full.alive.every(Boolean), "every gateway process alive while full");
        assert.deepEqual(result.unhandled, [], "unhandled rejections or crashes");
        // Once per process that saw it (each worker, and the primary's store of the trajectory stream at most).
        assert.ok(
          result.fullLogLines >= 1 && result.fullLogLines <= workers + 1,
          `logged ${result.fullLogLines} times`,
        );
        assert.deepEqual(result.checks.afterSpaceReturns, { finish: 200, create: 201 });
        assert.ok(result.resumeLogLines >= 1, "the return of space is logged");
        assert.ok(result.acknowledgedCalls > 0 && result.acknowledgedFinishes > 0);
        assert.deepEqual(
          result.missingAfterReopen,
          [],
          "acknowledged calls or finishes missing from the reopened store",
        );
        assert.equal(result.exit, "0", "the gateway stops cleanly on SIGTERM");
      },
    );
  }
});
