// End to end: the real Claude Code CLI (@anthropic-ai/claude-code, unmodified; `claude -p`) runs a task offline in a
// temp workspace against rlgate in front of the simulated vLLM, over streaming Anthropic Messages. The scripted main
// agent hands the first step to a general-purpose sub-agent through its `Agent` tool; the sub-agent runs `Bash`; the
// main agent runs `Bash` again and answers. The test checks the files the commands wrote, the captured calls (main
// and sub-agent threads, upstream token ids) and the rollout's segments: a main thread and a sub-agent under it.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { ScriptTurn } from "../../sim/index.ts";
import type { CallRecord } from "../../store/records.ts";
import type { CreatedRollout, Stack } from "../helpers.ts";
import { runHarnessSession, type HarnessSession } from "./harness-session.ts";
import { describeRun, finishAndReconstruct, type CliRun, type HarnessDirs } from "./harness-run.ts";
import { CLAUDE_CODE } from "../../runner/harnesses/claude-code.ts";
import { cliSkip } from "./harnesses.ts";

/** A run takes ~5 s; Claude Code retries failed requests with backoff, so it is killed (with its group) after this. */
const CLAUDE_TIMEOUT_MS = 90_000;

const SUBTASK = "SUBTASK: write step1 into a.txt with Bash.";
const FINAL_TEXT = "Done: proof.txt holds step1 step2.";
const SCRIPT: ScriptTurn[] = [
  {
    reasoning: "I will delegate the first file to a sub-agent.",
    content: "Delegating the first file.",
    tool_calls: [
      { name: "Agent", arguments: { description: "Write a.txt", prompt: SUBTASK, subagent_type: "general-purpose" } },
    ],
  },
  {
    thread: "SUBTASK:",
    reasoning: "Write the file.",
    tool_calls: [{ name: "Bash", arguments: { command: "printf step1 > a.txt", description: "Write a.txt" } }],
  },
  { thread: "SUBTASK:", reasoning: "Written.", content: "a.txt holds step1." },
  {
    reasoning: "Now the proof file.",
    tool_calls: [
      {
        name: "Bash",
        arguments: { command: "cat a.txt > proof.txt && printf ' step2' >> proof.txt", description: "Write proof.txt" },
      },
    ],
  },
  { reasoning: "All done.", content: FINAL_TEXT },
];

const firstUserText = (call: CallRecord): string =>
  JSON.stringify(((call.requestReceived as any).messages as any[])[0]?.content ?? "");

describe(
  "Claude Code CLI through rlgate (-p, streaming Messages, a sub-agent through Agent)",
  {
    skip: cliSkip(CLAUDE_CODE),
  },
  () => {
    let session: HarnessSession;
    let stack: Stack;
    let rollout: CreatedRollout;
    let dirs: HarnessDirs;
    let run: CliRun;
    let calls: CallRecord[];
    const diag = () => describeRun("claude", run, calls);

    before(
      async () => {
        session = await runHarnessSession(CLAUDE_CODE, {
          script: SCRIPT,
          task: "claude-code-e2e",
          prompt: "Write step1 into a.txt through a sub-agent, then proof.txt.",
          timeoutMs: CLAUDE_TIMEOUT_MS,
        });
        ({ stack, rollout, dirs, run, calls } = session);
      },
      { timeout: CLAUDE_TIMEOUT_MS + 60_000 },
    );

    after(() => session?.close());

    test("claude exits 0, the sub-agent's and the main agent's commands really ran, and it prints the answer as sampled", () => {
      assert.equal(run.timedOut, false, diag());
      assert.equal(run.code, 0, diag());
      assert.equal(readFileSync(join(dirs.workspace, "a.txt"), "utf8"), "step1", diag());
      assert.equal(readFileSync(join(dirs.workspace, "proof.txt"), "utf8"), "step1 step2", diag());
      assert.equal(run.stdout, `${FINAL_TEXT}\n`, `no blank line before the answer\n${diag()}`);
    });

    test("every call is a streamed Messages call with upstream token ids: three of the main agent, two of the sub-agent", () => {
      assert.equal(calls.length, 5, diag());
      for (const call of calls) {
        const where = `call #${call.seq}\n${diag()}`;
        assert.equal(call.api, "messages", where);
        assert.equal(call.status, "ok", where);
        assert.equal(call.stream, true, where);
        assert.equal(call.tokenSource, "upstream", where);
        assert.equal(call.model, "claude-sonnet-4-5", where);
        assert.ok(
          call.choices[0]!.tokenIds.length > 0 &&
            call.choices[0]!.logprobs!.length === call.choices[0]!.tokenIds.length,
          where,
        );
      }
      const sub = calls.filter((c) => firstUserText(c).includes("SUBTASK:"));
      assert.equal(sub.length, 2, diag());
      const main = calls.filter((c) => !sub.includes(c));
      assert.ok(
        ((main[0]!.requestReceived as any).tools as any[]).some((t) => t.name === "Agent"),
        "the sub-agent tool is Agent",
      );
      const agentCall = main[0]!.choices[0]!.finishReason;
      assert.equal(agentCall, "tool_calls");
    });

    test("its trajectories: the main thread trained, the sub-agent a segment of its own under it, nothing flagged", async () => {
      const rec = await finishAndReconstruct(stack.gateway.url, rollout.id);
      assert.equal(rec.flags.flagged, false, JSON.stringify(rec.flags));
      const segments = rec.segments as {
        id: number;
        kind: string;
        parentId: number | null;
        callSeqs: number[];
        trained: boolean;
      }[];
      const main = segments.find((s) => s.kind === "main")!;
      const sub = segments.find((s) => s.kind === "sub_agent")!;
      assert.ok(main && sub, JSON.stringify(segments));
      assert.equal(sub.parentId, main.id);
      assert.equal(main.callSeqs.length, 3);
      assert.equal(sub.callSeqs.length, 2);
      assert.equal(main.trained, true);
      assert.equal(rec.stats.breaks["sub_agent"], 1, JSON.stringify(rec.stats));
      const mainSampled = calls
        .filter((c) => main.callSeqs.includes(c.seq))
        .reduce((n, c) => n + c.choices[0]!.tokenIds.length, 0);
      assert.equal(
        rec.stats.trainedTokens,
        mainSampled,
        `the main thread's sampled tokens, each trained once (sub-agents are not trained by default): ${JSON.stringify(segments)}`,
      );
      const trained = rec.trajectories
        .filter((t) => t.trained)
        .reduce((n, t) => n + t.lossMask.filter((m) => m === 1).length, 0);
      assert.equal(trained, rec.stats.trainedTokens);
    });
  },
);
