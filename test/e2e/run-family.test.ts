// End to end: `rlgate run --model-dir DIR` on a chat family other than Qwen3's. Its own gateway and built-in sim serve
// DIR's family (as `rlgate serve --upstream sim --model-dir DIR`), the real Claude Code CLI (the fastest to start) runs
// in bubblewrap sandboxes, the sim plays examples/tasks/fix-add/sim-claude-code.json (its calls written in the family's
// syntax), grading gives reward 1 to both rollouts, and what a trainer gets is in the family's tokens: prompts open with
// its system header, sampled calls decode to the script's call, `rlgate show --model-dir` reads it in its markup.
//
// By default Llama 3.x in tokens mode. RLGATE_RUN_FAMILIES=all (or a comma list of qwen3-coder, llama3, gpt-oss,
// deepseek-v3.1) runs those families in both prompt modes.
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { MATRIX_FAMILIES, familySetup, type MatrixFamily } from "../../scripts/matrix-families.ts";
import { Store } from "../../store/store.ts";
import { loadModelChatFormat } from "../../tokenizer/model-format.ts";
import { ROOT, runCli, tempDir } from "../helpers.ts";
import { sandboxSkip } from "./runner-support.ts";

const TASK = join(ROOT, "examples", "tasks", "fix-add");
const SCRIPT = join(TASK, "sim-claude-code.json");
const skip = sandboxSkip("claude", join(ROOT, "node_modules", ".bin", "claude"));

const wanted = process.env.RLGATE_RUN_FAMILIES;
const others: readonly MatrixFamily[] = MATRIX_FAMILIES.filter((f) => f !== "qwen3");
const families: readonly MatrixFamily[] = !wanted
  ? ["llama3"]
  : wanted === "all"
    ? others
    : wanted.split(",").map((f) => {
        if (!others.includes(f as MatrixFamily)) throw new Error(`RLGATE_RUN_FAMILIES: ${f} is not one of ${others}`);
        return f as MatrixFamily;
      });
const modes = wanted ? (["messages", "tokens"] as const) : (["tokens"] as const);

/** The banner's words for each family (serve's, from the family and its tool parser). */
const BANNER: Record<MatrixFamily, RegExp> = {
  qwen3: /Qwen3, hermes tool calls/,
  "qwen3-coder": /Qwen3-Coder \/ Qwen3\.5, qwen3_coder tool calls/,
  llama3: /Llama 3\.x, llama3_json tool calls/,
  "gpt-oss": /gpt-oss, openai tool calls/,
  "deepseek-v3.1": /DeepSeek V3\.1, deepseek_v31 tool calls/,
};

/**
 * Trajectories per rollout: one, but in messages mode the prompt after a tool call does not extend the earlier prompt
 * and answer for gpt-oss (harmony re-renders the call) and DeepSeek V3.1 (its template renders the turn's opening
 * otherwise than the generation prompt), so the answer after it is a second (docs/prompt-modes.md).
 */
function expectedTrajectories(family: MatrixFamily, mode: "messages" | "tokens"): number {
  return mode === "messages" && (family === "gpt-oss" || family === "deepseek-v3.1") ? 2 : 1;
}

describe("rlgate run --model-dir: a harness CLI in sandboxes on another chat family", { skip }, () => {
  const cleanup: string[] = [];
  after(() => {
    for (const d of cleanup) rmSync(d, { recursive: true, force: true });
  });

  for (const family of families)
    for (const mode of modes)
      test(`${family}, ${mode} mode: both rollouts graded 1, their main trajectories in the family's tokens`, async () => {
        const trajectories = expectedTrajectories(family, mode);
        const modelDir = familySetup(family).modelDir()!;
        const data = tempDir("run-family-store");
        cleanup.push(modelDir, data);
        const run = await runCli(
          [
            "run",
            ...["--tasks", TASK, "--harness", "claude-code", "-n", "2", "--timeout", "150"],
            ...["--model-dir", modelDir, "--prompts", mode, "--sim-script", SCRIPT, "--data", data, "--json"],
          ],
          300_000,
        );
        assert.equal(run.code, 0, run.stderr);
        assert.match(run.stderr, BANNER[family]);
        const results = JSON.parse(run.stdout) as Array<Record<string, any>>;
        assert.deepEqual(
          results.map((r) => [r.sample, r.status, r.reward, r.trajectories]),
          [
            [0, "ok", 1, trajectories],
            [1, "ok", 1, trajectories],
          ],
          run.stderr,
        );

        const format = loadModelChatFormat(modelDir);
        const store = new Store({ path: data });
        try {
          for (const r of results) {
            const calls = store.listCalls(r.rolloutId);
            assert.ok(calls.length >= 2, `${calls.length} calls`);
            for (const call of calls) {
              assert.equal(call.status, "ok");
              assert.equal(call.tokenSource, "upstream");
              if (mode === "tokens") assert.equal(call.prompt?.mode, "tokens", call.prompt?.fallbackReason);
              assert.deepEqual(call.promptTokenIds!.slice(0, format.systemHeader.length), [...format.systemHeader]);
            }
            const first = calls.sort((a, b) => a.seq - b.seq)[0]!;
            assert.match(format.decode(first.choices[0]!.tokenIds), /Bash/);
          }
        } finally {
          await store.close();
        }

        const show = await runCli(["show", "--data", data, results[0]!.rolloutId, "--model-dir", modelDir]);
        assert.equal(show.code, 0, show.stderr);
        assert.match(show.stdout, trajectories === 1 ? /1 trajectory \(1 trained\)/ : /2 trajectories \(2 trained\)/);
        assert.match(show.stdout, trajectories === 1 ? /breaks: none/ : /breaks: (reserialization|branch) 1\n/);
        assert.match(show.stdout, /segments:\n {2}#0 main \(trained\)/);
        assert.ok(show.stdout.includes(format.family.markup.header("assistant")), show.stdout);
      });
});

describe("rlgate run --model-dir refusals", () => {
  test("a directory of no known family, or --model-dir with --gateway: one sentence, exit 2", async () => {
    const dir = tempDir("run-family-unknown");
    try {
      writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ chat_template: "{{ messages }}" }));
      const unknown = await runCli(["run", "--tasks", TASK, "--harness", "claude-code", "--model-dir", dir]);
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /^rlgate run: --model-dir .*: the chat template is of no family rlgate knows/);
      assert.doesNotMatch(unknown.stderr, /\n\s+at /, "no stack trace");
      const withGateway = await runCli([
        "run",
        "--tasks",
        TASK,
        "--harness",
        "claude-code",
        "--model-dir",
        dir,
        "--gateway",
        "http://127.0.0.1:9",
      ]);
      assert.equal(withGateway.code, 2);
      assert.match(withGateway.stderr, /--model-dir is for the gateway rlgate run starts itself, not for --gateway/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
