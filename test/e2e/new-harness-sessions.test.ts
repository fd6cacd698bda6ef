// Kilo Code, Gemini CLI and Crush (issue 46), each the real CLI through an `rlgate serve` in front of the sim, on the
// matrix's 8-call main session (text before a tool call, parallel tool calls, a turn without thinking; the shell
// commands really run and build all.txt), streamed, in both prompt modes: the task done, every call captured with
// upstream ids, one main trajectory and no break, amplification ≤ 1.02 in tokens mode, no token trained twice.
// Crush runs only where its binary was downloaded (its package fetches it from GitHub releases; docs/harnesses.md).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { runSession, type SessionResult } from "../../cli/harness-check/session-run.ts";
import { SESSIONS } from "../../cli/harness-check/sessions.ts";
import { CRUSH } from "../../runner/harnesses/crush.ts";
import { GEMINI } from "../../runner/harnesses/gemini.ts";
import { KILO } from "../../runner/harnesses/opencode.ts";
import type { ApiSurface } from "../../store/records.ts";
import { describeCalls } from "./harness-run.ts";
import { cliSkip, testModel, testModelMap, type Harness } from "./harnesses.ts";

/** Kilo's first start migrates its local database: ~60 s on a loaded machine. */
const TIMEOUT_MS = 180_000;

const CASES: { harness: Harness; api: ApiSurface }[] = [
  { harness: KILO, api: "chat.completions" },
  { harness: GEMINI, api: "gemini" },
  { harness: CRUSH, api: "chat.completions" },
];

for (const { harness, api } of CASES) {
  describe(`${harness.name} through rlgate, the matrix's main session`, { skip: cliSkip(harness) }, () => {
    for (const prompts of ["messages", "tokens"] as const) {
      test(
        `${prompts} prompts: task done, every call streamed and captured, one main trajectory, each sampled token trained once`,
        { timeout: TIMEOUT_MS + 60_000 },
        async () => {
          const { row, calls, reconstruction }: SessionResult = await runSession(
            harness,
            "main",
            SESSIONS["main"]!(harness.scripting!),
            {
              serveArgs: ["--prompts", prompts],
              timeoutMs: TIMEOUT_MS,
              model: testModel(harness),
              modelMap: testModelMap(harness),
            },
          );
          const diag = `${JSON.stringify(row)}\n${describeCalls(calls)}`;
          assert.equal(row.outcome, "ok", diag);
          assert.ok(calls.length >= 6, diag);
          for (const c of calls) {
            assert.equal(c.status, "ok", diag);
            assert.equal(c.tokenSource, "upstream", diag);
            assert.equal(c.api, api, diag);
            assert.equal(c.stream, true, diag);
          }
          const rec = reconstruction!;
          assert.deepEqual(
            rec.trajectories.map((t) => t.segment),
            ["main"],
            diag,
          );
          assert.deepEqual(rec.breaks, [], diag);
          if (prompts === "tokens") assert.ok(rec.stats.amplification <= 1.02, diag);
          // Every sampled token trained, once: the one trajectory's loss mask covers exactly the sampled tokens.
          const trained = rec.trajectories.reduce((n, t) => n + t.lossMask.filter((m) => m === 1).length, 0);
          assert.equal(trained, rec.stats.trainedTokens, diag);
          assert.equal(rec.stats.trainedTokens, rec.stats.sampledTokens, diag);
        },
      );
    }
  });
}
