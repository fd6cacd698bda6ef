// End to end: the real pi coding agent (@mariozechner/pi-coding-agent, unmodified) runs one prompt, offline, in a temp
// workspace, against rlgate in front of the simulated vLLM — once per API pi speaks: Anthropic Messages, OpenAI
// Responses and chat completions. The scripted model calls pi's `bash` tool; each test checks that the command really
// ran and that the rollout holds every call pi made, with the upstream's token ids and logprobs.
// How pi is driven (config, env, what it sends) is written up in PI_CODING_AGENT_NOTES.md beside this file.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import type { ScriptTurn } from "../../sim/index.ts";
import type { ApiSurface } from "../../store/records.ts";
import { killGroup } from "../../runner/harness-local.ts";
import { createRollout, rolloutCalls, startStack, tempDir, type Stack } from "../helpers.ts";
import { assertCaptureEquals, upstreamAnswer } from "../surfaces-helpers.ts";
import { requireInCi } from "../require-in-ci.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const PI_CLI = join(ROOT, "node_modules", "@mariozechner", "pi-coding-agent", "dist", "cli.js");
const PI_PRESENT = existsSync(PI_CLI);
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

const APIS: { piApi: string; surface: ApiSurface; base: "anthropic" | "openai" }[] = [
  { piApi: "anthropic-messages", surface: "messages", base: "anthropic" },
  { piApi: "openai-responses", surface: "responses", base: "openai" },
  { piApi: "openai-completions", surface: "chat.completions", base: "openai" },
];

interface PiRun {
  code: number | null;
  timedOut: boolean;
  ms: number;
  stdout: string;
  stderr: string;
  events: Record<string, any>[];
}

describe(
  "pi coding agent through rlgate",
  {
    skip: requireInCi(
      "the pi CLI (a devDependency: npm install)",
      PI_PRESENT ? null : `pi binary absent (${PI_CLI}); run npm install`,
    ),
  },
  () => {
    let stack: Stack;
    const children = new Set<ChildProcess>();
    const dirs: string[] = [];

    before(async () => {
      // pi asks for its own model name; the model map sends it to the one model the upstream serves.
      stack = await startStack({ sim: { script: SCRIPT }, gateway: { modelMap: "pi-*=Qwen/Qwen3-8B" } });
    });
    after(async () => {
      for (const child of children) killGroup(child);
      await stack?.close();
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });

    async function runPi(piApi: string, baseUrl: string): Promise<{ run: PiRun; workspace: string }> {
      const dir = tempDir("pi-e2e");
      dirs.push(dir);
      const workspace = join(dir, "workspace");
      const home = join(dir, "home");
      const agentDir = join(home, ".pi", "agent");
      for (const d of [workspace, agentDir, join(dir, "tmp")]) mkdirSync(d, { recursive: true });
      const models = {
        providers: {
          rlgate: {
            baseUrl,
            api: piApi,
            apiKey: "sk-rlgate-e2e",
            models: [{ id: "pi-model", reasoning: true, contextWindow: 40_000, maxTokens: 4000 }],
          },
        },
      };
      writeFileSync(join(agentDir, "models.json"), JSON.stringify(models, null, 2));
      writeFileSync(join(agentDir, "settings.json"), JSON.stringify({ enableInstallTelemetry: false }));
      // A clean environment; PI_OFFLINE turns off update checks and telemetry (the only other network use).
      const env: NodeJS.ProcessEnv = {
        PATH: process.env["PATH"] ?? "/usr/bin:/bin",
        HOME: home,
        TMPDIR: join(dir, "tmp"),
        TERM: "dumb",
        NO_COLOR: "1",
        PI_OFFLINE: "1",
        PI_TELEMETRY: "0",
        PI_SKIP_VERSION_CHECK: "1",
      };
      const args = [
        PI_CLI,
        "--provider",
        "rlgate",
        "--model",
        "pi-model",
        "--mode",
        "json",
        "--no-session",
        "-p",
        `Use bash to write ${PROOF_TEXT} into ${PROOF_FILE}.`,
      ];
      const started = Date.now();
      const child = spawn(process.execPath, args, {
        cwd: workspace,
        env,
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      });
      children.add(child);
      let stdout = "";
      let stderr = "";
      child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
      child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup(child);
      }, PI_TIMEOUT_MS);
      const code = await new Promise<number | null>((resolve) => {
        child.on("error", (err) => (stderr += `\nspawn error: ${err.message}`));
        child.on("close", (c) => resolve(c));
      });
      clearTimeout(timer);
      children.delete(child);
      const events = stdout
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as Record<string, any>);
      return { run: { code, timedOut, ms: Date.now() - started, stdout, stderr, events }, workspace };
    }

    for (const { piApi, surface, base } of APIS) {
      test(
        `pi over ${piApi}: its bash tool really runs and every call is captured with upstream token ids`,
        { timeout: PI_TIMEOUT_MS + 30_000 },
        async () => {
          const rollout = await createRollout(stack.gateway.url, { harness: `pi/${piApi}` });
          const baseUrl = base === "anthropic" ? rollout.base_urls.anthropic : rollout.base_urls.openai;
          const { run, workspace } = await runPi(piApi, baseUrl);
          const calls = (await rolloutCalls(stack.gateway.url, rollout.id)).sort((a, b) => a.seq - b.seq);
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
  },
);
