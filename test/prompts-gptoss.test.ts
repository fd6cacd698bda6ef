// gpt-oss end to end: the sim answers as vLLM serving gpt-oss (`--tool-call-parser openai`: harmony prompts rendered
// as vLLM renders them, analysis reasoning, one call to=functions.NAME a turn ended by <|call|>, final answers ended by
// <|return|>), the gateway renders and parses the same format in tokens mode, and agent sessions reconstruct as one
// trajectory.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ScriptTurn } from "../sim/index.ts";
import { GPTOSS_VOCAB_SIZE, gptossFiles } from "../tokenizer/gptoss.ts";
import { gptossChatFormat } from "../tokenizer/model-format.ts";
import { seededRandom } from "../util/seeded-random.ts";
import { type Stack, startStack } from "./helpers.ts";
import { assertOneTrajectory, scriptedSession, simShellCall, withModelDirServe } from "./family-chat.ts";

// One call a turn (<|call|> stops the model), some with a commentary preamble, text answers the user follows up on.
function script(random: () => number, turns: number): ScriptTurn[] {
  return Array.from({ length: turns }, (_, t) => {
    const turn: ScriptTurn = { reasoning: `Step ${t}: think é.` };
    if (random() < 0.5) turn.content = `Let me check ${t}.`;
    if (t === 1 || t === turns - 1) turn.content = `Found ${t} files 😀.`;
    else turn.tool_calls = [{ name: "run_shell_command", arguments: { command: `ls ${t}; wc -l é`, timeout: 10 * t } }];
    return turn;
  });
}

function session(stack: Stack, random: () => number, turns: ScriptTurn[]) {
  return scriptedSession(stack, random, turns, {
    body: { reasoning_effort: "low" },
    check: (answer, expected, stream) => {
      // A preamble before a call is content in vLLM's harmony stream, and left out of a whole answer (the openai tool
      // parser's content is the final message only).
      const preamble = stream && expected.content ? expected.content : null;
      assert.equal(answer.content, expected.tool_calls ? preamble : expected.content);
    },
  });
}

describe("gpt-oss (harmony, openai tool parser) end to end", () => {
  test("tokens mode: sessions with calls, preambles and text answers are one trajectory", async () => {
    for (let s = 0; s < 3; s++) {
      const random = seededRandom(700 + s);
      const turns = script(random, 3 + Math.floor(random() * 3));
      const stack = await startStack({
        sim: { script: turns, toolCallParser: "openai" },
        gateway: { prompts: "tokens", model: gptossChatFormat(), vocabSize: GPTOSS_VOCAB_SIZE },
      });
      try {
        const { calls, stats } = await session(stack, random, turns);
        for (const call of calls) assert.equal(call.prompt?.mode, "tokens");
        // Every prompt is a harmony prompt: <|start|>system<|message|>.
        for (const call of calls) assert.deepEqual(call.promptTokenIds?.slice(0, 3), [200006, 17360, 200008]);
        // Low effort reached the system message, rendered by the gateway as vLLM renders it.
        assert.ok(gptossChatFormat().decode(calls[0]!.promptTokenIds!).includes("\n\nReasoning: low\n\n"));
        assertOneTrajectory(stats);
      } finally {
        await stack.close();
      }
    }
  });

  test("messages mode: vLLM renders every earlier turn otherwise than the model wrote it, so each re-serializes", async () => {
    const random = seededRandom(800);
    const turns = script(random, 4);
    const stack = await startStack({
      sim: { script: turns, toolCallParser: "openai" },
      gateway: { prompts: "messages", model: gptossChatFormat(), vocabSize: GPTOSS_VOCAB_SIZE },
    });
    try {
      const { calls, stats } = await session(stack, random, turns);
      for (const call of calls) assert.equal(call.prompt?.mode ?? "messages", "messages");
      // A call's header comes back as `<|start|>assistant to=functions.NAME<|channel|>commentary json`, a final
      // answer's <|return|> as <|end|>: each later prompt leaves the earlier completion inside its sampled span.
      assert.equal(stats.breaks.reserialization, turns.length - 1, JSON.stringify(stats));
      assert.equal(stats.retained_trajectories, turns.length);
    } finally {
      await stack.close();
    }
  });
});

describe("rlgate serve --model-dir with gpt-oss's files", () => {
  test("config.json's model_type picks harmony; the built-in sim answers as gpt-oss and tokens mode parses it", async () => {
    const config = { model_type: "gpt_oss", vocab_size: GPTOSS_VOCAB_SIZE };
    await withModelDirServe(
      gptossFiles(),
      /openai tool calls/,
      async (url) => {
        const call = await simShellCall(url);
        // Ids above Qwen3's vocabulary pass: the bound is config.json's vocab_size.
        assert.equal(call.tokenSource, "upstream", call.tokenIssue ?? "");
        assert.deepEqual(call.promptTokenIds?.slice(0, 2), [200006, 17360]);
      },
      config,
    );
  });
});
