// The core's current policy version (policy-version.ts) survives a restart on the same store, as its staleness rule
// needs: a trainer's ResumePolicy names it, the core is closed and started again, and its status still says it.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { test } from "node:test";
import { TrainerClient } from "../../clients/ts/index.ts";
import { tempDir } from "../../test/helpers.ts";
import { startCore } from "./core.ts";

test("a version a resume named is the current version after a restart", async () => {
  const dataDir = tempDir("core-version-restart");
  const options = { gateways: [], port: 0, metricsPort: null, dataDir } as const;
  try {
    const first = await startCore(options);
    const trainer = new TrainerClient(first.address);
    try {
      assert.equal((await trainer.resumePolicy("step-12")).currentVersion, "step-12");
    } finally {
      trainer.close();
    }
    await first.close();
    const second = await startCore(options);
    try {
      assert.equal(second.currentVersion, "step-12");
      assert.equal(second.status().currentVersion, "step-12");
    } finally {
      await second.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
