// End to end: the real pi coding agent (@mariozechner/pi-coding-agent, unmodified) runs one prompt, offline, in a temp
// workspace, against rlgate in front of the simulated vLLM — once per API pi speaks: Anthropic Messages, OpenAI
// Responses and chat completions. The scripted model calls pi's `bash` tool; each test checks that the command really
// ran and that the rollout holds every call pi made, with the upstream's token ids and logprobs.
// How pi is driven (config, env, what it sends) is written up in PI_CODING_AGENT_NOTES.md beside this file.
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { HARNESS_PRESETS } from "../../runner/harnesses.ts";
import { harnessDirs, killLiveRuns, runCli, type CliRun } from "../../runner/harness-local.ts";
import type { ScriptTurn } from "../../sim/index.ts";
import type { ApiSurface } from "../../store/records.ts";
import { createRollout, rolloutCalls, startStack, type Stack } from "../helpers.ts";
import { assertCaptureEquals, upstreamAnswer } from "../surfaces-helpers.ts";
import { cliSkip, launch } from "./harnesses.ts";

/** A run takes ~2-3 s; pi retries failures, so it is killed (with its process group) after this. */
const PI_TIMEOUT_MS = 60_000;

const PROOF_FILE = "proof.txt";
const PROOF_TEXT = "rlgate-pi";
const FINAL_TEXT = `Done: ${PROOF_FILE} holds ${PROOF_TEXT}.`;
const SCRIPT: ScriptTurn[] = [
  {
    reasoning: "I will write the file with bash.",
    tool_calls: [{ name: "bash", arguments: { command: `echo ${PROOF_TEXT} > ${PROOF_FILE}` } }],
  },
  { reasoning: "The command ran, so the file is written.", content: FINAL_TEXT },
];

/** pi's presets, one per API it speaks (runner/harnesses/pi.ts). */
const APIS: { piApi: string; surface: ApiSurface; preset: string }[] = [
  { piApi: "anthropic-messages", surface: "messages", preset: "pi-messages" },
  { piApi: "openai-responses", surface: "responses", preset: "pi-responses" },
  { piApi: "openai-completions", surface: "chat.completions", preset: "pi" },
];

interface PiRun extends CliRun {
  events: Record<string, any>[];
}

describe("pi coding agent through rlgate", { skip: cliSkip(HARNESS_PRESETS["pi"]!) }, () => {
  let stack: Stack;
  const dirRoots: string[] = [];

  before(async () => {
    // pi asks for its own model name; the model map sends it to the one model the upstream serves.
    stack = await startStack({ sim: { script: SCRIPT }, gateway: { modelMap: "pi-*=Qwen/Qwen3-8B" } });
  });
  after(async () => {
    killLiveRuns();
    await stack?.close();
    for (const dir of dirRoots) rmSync(dir, { recursive: true, force: true });
  });

  /** The registry's pi preset for `piApi`, run outside a sandbox, with its events as JSON lines on stdout. */
  async function runPi(preset: string): Promise<{ run: PiRun; workspace: string; rolloutId: string }> {
    const rollout = await createRollout(stack.gateway.url, { harness: preset });
    const dirs = harnessDirs("pi-e2e");
    dirRoots.push(dirs.dir);
    const { command, args, env } = launch(
      HARNESS_PRESETS[preset]!,
      dirs,
      rollout,
      `Use bash to write ${PROOF_TEXT} into ${PROOF_FILE}.`,
      { model: "pi-model" },
    );
    const run = await runCli(command, [...args, "--mode", "json"], {
      cwd: dirs.workspace,
      env,
      timeoutMs: PI_TIMEOUT_MS,
    });
    const events = run.stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Record<string, any>);
    return { run: { ...run, events }, workspace: dirs.workspace, rolloutId: rollout.id };
  }

  for (const { piApi, surface, preset } of APIS) {
    test(
      `pi over ${piApi}: its bash tool really runs and every call is captured with upstream token ids`,
      { timeout: PI_TIMEOUT_MS + 30_000 },
      async () => {
        const { run, workspace, rolloutId } = await runPi(preset);
        const calls = (await rolloutCalls(stack.gateway.url, rolloutId)).sort((a, b) => a.seq - b.seq);
        const diag = () =>
          [
            `pi exit=${run.code} timedOut=${run.timedOut} after ${run.ms} ms`,
            `--- stderr ---\n${run.stderr.slice(-3000)}`,
            `--- stdout (tail) ---\n${run.stdout.slice(-3000)}`,
            `--- calls ---\n${calls.map((c) => `#${c.seq} ${c.api} ${c.status} ${c.tokenSource} http=${c.httpStatus} ${c.error ?? ""}`).join("\n")}`,
          ].join("\n");

        assert.equal(run.timedOut, false, diag());
        assert.equal(run.code, 0, diag());
        assert.equal(readFileSync(join(workspace, PROOF_FILE), "utf8"), `${PROOF_TEXT}\n`, diag());
        const toolEnd = run.events.find((e) => e.type === "tool_execution_end");
        assert.equal(toolEnd?.toolName, "bash", diag());
        assert.equal(toolEnd?.isError, false, diag());
        const finalMessage = run.events
          .filter((e) => e.type === "message_end" && e.message?.role === "assistant")
          .at(-1)?.message;
        const finalText = (finalMessage?.content ?? [])
          .filter((b: any) => b.type === "text")
          .map((b: any) => b.text)
          .join("");
        assert.equal(finalText.trim(), FINAL_TEXT, diag());

        assert.equal(calls.length, 2, `one call for the tool call, one for the answer\n${diag()}`);
        for (const call of calls) {
          assert.equal(call.api, surface, diag());
          assert.equal(call.stream, true, "pi streams");
          assert.equal(call.model, "pi-model");
          assertCaptureEquals(call, await upstreamAnswer(stack, call), `${piApi} call #${call.seq}`);
        }
        // pi re-serializes tool arguments compactly, so call 2 re-renders call 1's sampled turn differently (a
        // re-serialization break the trajectory tree classifies); the prompt up to that turn is shared.
        const [first, second] = calls;
        assert.deepEqual(second!.promptTokenIds!.slice(0, first!.promptTokenIds!.length), first!.promptTokenIds);
      },
    );
  }
});
