// End to end: the real OpenCode CLI (opencode-ai, unmodified; `opencode run`) runs a two-step task offline in a temp
// workspace against rlgate in front of the simulated vLLM, over chat completions: a custom OpenAI-compatible provider
// in its config file points at the rollout's base URL. OpenCode first asks for a title (a one-shot side call), then
// its agent runs `bash` twice and answers. The test checks the files, the captured calls and the trajectories.
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
import { OPENCODE, OPENCODE_TITLE_THREAD } from "../../runner/harnesses/opencode.ts";
import { cliSkip } from "./harnesses.ts";

/** A run takes 10-30 s on a loaded machine (its first start migrates a local database); killed after this. */
const OPENCODE_TIMEOUT_MS = 120_000;

const FINAL_TEXT = "Done: proof.txt holds step1 step2.";
const SCRIPT: ScriptTurn[] = [
  { thread: OPENCODE_TITLE_THREAD, reasoning: "A short title.", content: "Writing proof files" },
  {
    reasoning: "First file.",
    content: "Writing a.txt.",
    tool_calls: [{ name: "bash", arguments: { command: "printf step1 > a.txt", description: "Write a.txt" } }],
  },
  {
    reasoning: "Now the proof file.",
    tool_calls: [
      {
        name: "bash",
        arguments: { command: "cat a.txt > proof.txt && printf ' step2' >> proof.txt", description: "Write proof.txt" },
      },
    ],
  },
  { reasoning: "All done.", content: FINAL_TEXT },
];

describe(
  "OpenCode CLI through rlgate (run, chat completions)",
  {
    skip: cliSkip(OPENCODE),
  },
  () => {
    let session: HarnessSession;
    let stack: Stack;
    let rollout: CreatedRollout;
    let dirs: HarnessDirs;
    let run: CliRun;
    let calls: CallRecord[];
    let rec: Reconstruction | undefined;
    const diag = () => describeRun("opencode", run, calls);

    before(
      async () => {
        session = await runHarnessSession(OPENCODE, {
          script: SCRIPT,
          task: "opencode-e2e",
          prompt: "Write step1 into a.txt, then proof.txt.",
          timeoutMs: OPENCODE_TIMEOUT_MS,
        });
        ({ stack, rollout, dirs, run, calls } = session);
      },
      { timeout: OPENCODE_TIMEOUT_MS + 60_000 },
    );

    after(() => session?.close());

    test("opencode exits 0 and both bash commands really ran in the workspace", () => {
      assert.equal(run.timedOut, false, diag());
      assert.equal(run.code, 0, diag());
      assert.equal(readFileSync(join(dirs.workspace, "a.txt"), "utf8"), "step1", diag());
      assert.equal(readFileSync(join(dirs.workspace, "proof.txt"), "utf8"), "step1 step2", diag());
      assert.match(run.stdout, new RegExp(FINAL_TEXT.replaceAll(".", "\\.")), diag());
    });

    test("every call is a streamed chat call with upstream token ids: the title, then three agent turns", () => {
      assert.equal(calls.length, 4, diag());
      for (const call of calls) {
        const where = `call #${call.seq}\n${diag()}`;
        assert.equal(call.api, "chat.completions", where);
        assert.equal(call.status, "ok", where);
        assert.equal(call.stream, true, where);
        assert.equal(call.tokenSource, "upstream", where);
        assert.ok(call.choices[0]!.tokenIds.length > 0, where);
      }
      const title = calls.filter((c) =>
        JSON.stringify((c.requestReceived as any).messages).includes(OPENCODE_TITLE_THREAD),
      );
      assert.equal(title.length, 1, diag());
      const agent = calls.filter((c) => !title.includes(c));
      assert.ok(
        agent.every((c) => ((c.requestReceived as any).tools as any[]).some((t) => t.function.name === "bash")),
        diag(),
      );
    });

    test("its trajectories: every agent turn in one thread; each sampled token trained at most once; nothing flagged", async () => {
      rec = await finishAndReconstruct(stack.gateway.url, rollout.id);
      assert.equal(rec.flags.flagged, false, JSON.stringify(rec.flags));
      const segments = rec.segments as { kind: string; callSeqs: number[] }[];
      const agentSeqs = calls.filter((c) => ((c.requestReceived as any).tools ?? []).length > 0).map((c) => c.seq);
      assert.ok(
        segments.some((s) => agentSeqs.every((seq) => s.callSeqs.includes(seq))),
        `one segment holds the agent's calls: ${JSON.stringify(segments)}`,
      );
      assert.ok(rec.stats.trainedTokens <= rec.stats.sampledTokens, JSON.stringify(rec.stats));
      const trained = rec.trajectories
        .filter((t) => t.trained)
        .reduce((n, t) => n + t.lossMask.filter((m) => m === 1).length, 0);
      assert.equal(trained, rec.stats.trainedTokens);
    });

    test("the agent's thread is the main segment (trained), the title request an auxiliary side call", () => {
      assert.ok(rec, "reconstructed above");
      const segments = rec.segments as { kind: string; callSeqs: number[]; trained: boolean }[];
      const title = calls.find((c) =>
        JSON.stringify((c.requestReceived as any).messages).includes(OPENCODE_TITLE_THREAD),
      )!;
      const agentSeqs = calls.filter((c) => c !== title).map((c) => c.seq);
      const agent = segments.find((s) => s.callSeqs.includes(agentSeqs[0]!));
      assert.equal(agent?.kind, "main", JSON.stringify(segments));
      assert.equal(agent?.trained, true);
      assert.equal(segments.find((s) => s.callSeqs.includes(title.seq))?.kind, "auxiliary", JSON.stringify(segments));
    });
  },
);
