// End to end: the real Codex CLI (@openai/codex, unmodified; `codex exec`) runs a two-step task offline in a temp
// workspace against rlgate in front of the simulated vLLM, over the Responses API. Its config is Codex's default plus
// one provider entry pointing at the rollout's base URL (and the switches that keep it off the network), so the
// request carries every tool Codex sends by default: function tools, the multi-agent `namespace`, the hosted
// `web_search` (dropped upstream, with a warning on the call). The scripted model writes text before a tool call and
// runs `exec_command` twice; the test checks the files the commands wrote, the captured calls and the trajectories.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { ScriptTurn } from "../../sim/index.ts";
import type { CallRecord } from "../../store/records.ts";
import type { CreatedRollout, Stack } from "../helpers.ts";
import { runHarnessSession, type HarnessSession } from "./harness-session.ts";
import {
  describeRun,
  finishAndReconstruct,
  type CliRun,
  type HarnessDirs,
  type Reconstruction,
} from "./harness-run.ts";
import { CODEX } from "../../runner/harnesses/codex.ts";
import { cliSkip } from "./harnesses.ts";

/** A run takes 2-5 s; Codex retries failed requests for minutes, so it is killed (with its group) after this. */
const CODEX_TIMEOUT_MS = 90_000;

const FINAL_TEXT = "Done: proof.txt holds step1 step2.";
const SCRIPT: ScriptTurn[] = [
  {
    reasoning: "First write step1 into a.txt.",
    content: "I'll write the first file.",
    tool_calls: [{ name: "exec_command", arguments: { cmd: "printf step1 > a.txt" } }],
  },
  {
    reasoning: "Now copy it into proof.txt and add step2.",
    tool_calls: [{ name: "exec_command", arguments: { cmd: "cat a.txt > proof.txt && printf ' step2' >> proof.txt" } }],
  },
  { reasoning: "Both commands succeeded.", content: FINAL_TEXT },
];

describe(
  "Codex CLI through rlgate (exec, Responses)",
  {
    skip: cliSkip(CODEX),
  },
  () => {
    let session: HarnessSession;
    let stack: Stack;
    let rollout: CreatedRollout;
    let dirs: HarnessDirs;
    let run: CliRun;
    let calls: CallRecord[];
    let rec: Reconstruction;
    const diag = () => describeRun("codex", run, calls);

    before(
      async () => {
        session = await runHarnessSession(CODEX, {
          script: SCRIPT,
          task: "codex-e2e",
          prompt: "Write step1 into a.txt, then proof.txt with step1 step2.",
          model: "gpt-5.1-codex",
          timeoutMs: CODEX_TIMEOUT_MS,
        });
        ({ stack, rollout, dirs, run, calls } = session);
      },
      { timeout: CODEX_TIMEOUT_MS + 60_000 },
    );

    after(() => session?.close());

    test("codex exits 0, both commands really ran in the workspace, and it prints the answer without blank lines", () => {
      assert.equal(run.timedOut, false, diag());
      assert.equal(run.code, 0, diag());
      assert.equal(readFileSync(join(dirs.workspace, "a.txt"), "utf8"), "step1", diag());
      assert.equal(readFileSync(join(dirs.workspace, "proof.txt"), "utf8"), "step1 step2", diag());
      assert.equal(run.stdout.trim(), FINAL_TEXT, diag());
    });

    test("every call is captured on the Responses surface with upstream token ids; the hosted tool's drop is recorded", () => {
      assert.equal(calls.length, 3, diag());
      for (const call of calls) {
        const where = `call #${call.seq}\n${diag()}`;
        assert.equal(call.api, "responses", where);
        assert.equal(call.status, "ok", where);
        assert.equal(call.stream, true, where);
        assert.equal(call.tokenSource, "upstream", where);
        assert.ok(call.promptTokenIds!.length > 1000, where);
        assert.ok(
          call.choices[0]!.tokenIds.length > 0 &&
            call.choices[0]!.logprobs!.length === call.choices[0]!.tokenIds.length,
          where,
        );
        const sent = (call.requestReceived as any).tools as any[];
        assert.ok(
          sent.some((t) => t.type === "namespace"),
          "Codex's default tools include a namespace",
        );
        const forwarded = ((call.requestForwarded as any).tools as any[]).map((t) => t.function.name);
        assert.ok(
          forwarded.includes("exec_command") && forwarded.some((n: string) => n.includes("__")),
          `flattened: ${forwarded}`,
        );
        assert.ok(
          call.warnings?.some((w) => /hosted tool 'web_search' dropped/.test(w)),
          `${call.warnings}`,
        );
      }
      // The second call's history holds the first call's tool call as the model made it, and its output.
      const input = (calls[1]!.requestReceived as any).input as any[];
      assert.ok(
        input.some((i) => i.type === "function_call" && i.name === "exec_command"),
        diag(),
      );
      assert.ok(
        input.some((i) => i.type === "function_call_output"),
        diag(),
      );
    });

    test("its trajectories: one main agent, every sampled token trained once, nothing flagged", async () => {
      rec = await finishAndReconstruct(stack.gateway.url, rollout.id);
      assert.equal(rec.flags.flagged, false, JSON.stringify(rec.flags));
      assert.ok(
        rec.trajectories.every((t) => t.segment === "main" && t.reward === 1),
        JSON.stringify(rec.stats),
      );
      assert.equal(rec.stats.trainedTokens, rec.stats.sampledTokens, JSON.stringify(rec.stats));
      const sampled = calls.reduce((n, c) => n + c.choices[0]!.tokenIds.length, 0);
      assert.equal(rec.stats.sampledTokens, sampled);
      // Each break is one the tree classifies, never an unexplained fork.
      for (const brk of rec.breaks) assert.ok(["reserialization"].includes(brk.kind), JSON.stringify(rec.breaks));
      assert.equal(rec.trajectories.length, 1 + rec.breaks.length);
    });
  },
);
