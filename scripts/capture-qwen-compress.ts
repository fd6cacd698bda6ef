// Records a Qwen Code `/compress` session through a tokens-mode gateway and the sim, as the golden fixture
// trajectory/fixtures/qwen-code-compress-tokens.json.gz: a session, then `qwen --continue -p /compress`, then
// `qwen --continue -p …`. Qwen Code >= 0.2x sends its summarizing request appended to the agent's own history (with
// the agent's tools), which needs Node >= 22; the project's own Qwen Code (0.15) runs its summarizer as a thread of its
// own. Give the CLI and the Node that runs it:
//   QWEN_CLI=…/node_modules/@qwen-code/qwen-code/cli.js QWEN_NODE=…/bin/node npx tsx scripts/capture-qwen-compress.ts OUT.json.gz
import { writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { startGateway } from "../gateway/index.ts";
import { startSim, type ScriptTurn } from "../sim/index.ts";
import { createRollout, rolloutCalls, tempDir } from "../test/helpers.ts";
import { harnessDirs, runCli } from "../test/e2e/harness-run.ts";
import { QWEN_CODE } from "../runner/harnesses/qwen-code.ts";
import { launch, SERVED_MODEL } from "../test/e2e/harnesses.ts";
import { toFixture } from "../trajectory/testing/cli-fixtures.ts";

const cli = process.env["QWEN_CLI"];
const node = process.env["QWEN_NODE"] ?? process.execPath;
const out = process.argv[2];
if (!cli || !out) throw new Error("usage: QWEN_CLI=… [QWEN_NODE=…] capture-qwen-compress.ts OUT.json.gz");

const FIRST = "Write f1 and f2 as scripted.";
const LAST = "Combine f1 and f2 into all.txt.";
// Both of Qwen Code's summarizing requests (its own thread, or appended to the history) end with this.
const SUMMARY_REQUEST = "the <state_snapshot>";
const SUMMARY =
  "<analysis>f1 and f2 are written; all.txt is next.</analysis>\n<state_snapshot>The user asked to build all.txt " +
  "from parts written with the shell. f1 holds 12 and f2 holds 345, both written in the workspace. Next: combine f1 " +
  "and f2 into all.txt with cat, which then holds 12345.</state_snapshot>";
const shell = (command: string) => QWEN_CODE.scripting!.shell(command);
const script: ScriptTurn[] = [
  { prompt: FIRST, reasoning: "First file.", content: "Writing f1.", tool_calls: [shell("printf 12 > f1")] },
  { prompt: FIRST, reasoning: "Second file.", tool_calls: [shell("printf 345 > f2")] },
  // Output worth compacting: Qwen Code refuses a summary longer than the history it replaces.
  { prompt: FIRST, reasoning: "Check the numbers.", tool_calls: [shell("seq 1 400")] },
  { prompt: FIRST, reasoning: "Both written.", content: "f1 and f2 are written." },
  { prompt: SUMMARY_REQUEST, reasoning: "Summarize the work so far.", content: SUMMARY },
  { prompt: LAST, reasoning: "Combine them.", tool_calls: [shell("cat f1 f2 > all.txt")] },
  { prompt: LAST, reasoning: "Done.", content: "Done: all.txt holds 12345." },
];

// Qwen Code asks for 32k new tokens: a window it fits in.
const sim = await startSim({ port: 0, script, maxModelLen: 131_072 });
const dataDir = tempDir("compress-store");
const gateway = await startGateway({ upstream: sim.url, port: 0, dataDir, prompts: "tokens" });
try {
  const rollout = await createRollout(gateway.url);
  const dirs = harnessDirs("qwen-compress");
  for (const [i, prompt] of [FIRST, "/compress", LAST].entries()) {
    const qwen = launch(QWEN_CODE, dirs, rollout, prompt, { model: SERVED_MODEL, resume: i > 0 });
    const args = [cli, ...qwen.args];
    const run = await runCli(node, args, { cwd: dirs.workspace, env: qwen.env, timeoutMs: 240_000 });
    console.log(
      `qwen ${args.slice(1).join(" ")}: exit ${run.code}\n${run.stdout.slice(-400)}${run.stderr.slice(-400)}`,
    );
  }
  const calls = await rolloutCalls(gateway.url, rollout.id);
  const fixture = toFixture(calls, { harness: "qwen-code", session: "compress", mode: "tokens" });
  writeFileSync(out, gzipSync(JSON.stringify(fixture)));
  console.log(`${calls.length} calls written to ${out}`);
} finally {
  await gateway.close();
  await sim.close();
}
