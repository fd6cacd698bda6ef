// Llama 3.x end to end: the sim answers as vLLM serving Llama 3.2 (`--tool-call-parser llama3_json`, its tokenizer and
// chat template, JSON tool calls, no reasoning), the gateway renders and parses the same family (tokens mode) or
// forwards messages (with history repair by Llama's rules), and agent sessions reconstruct as one trajectory.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ScriptTurn } from "../sim/index.ts";
import { llama3Files } from "../tokenizer/llama3.ts";
import { llama3ChatFormat } from "../tokenizer/model-format.ts";
import { seededRandom } from "../util/seeded-random.ts";
import { type Stack, startStack } from "./helpers.ts";
import { assertOneTrajectory, scriptedSession, simShellCall, withModelDirServe } from "./family-chat.ts";

// One call a turn (Llama's template renders no more), some turns with text before it (the model does not write it:
// the sim drops it as Llama would), some text-only answers the user follows up on.
function script(random: () => number, turns: number): ScriptTurn[] {
  return Array.from({ length: turns }, (_, t) => {
    const turn: ScriptTurn = { reasoning: "Llama has no reasoning: never written." };
    if (random() < 0.5) turn.content = `Let me check ${t} é.`;
    if (t === 1 || t === turns - 1) turn.content = `Found ${t} files 😀.`;
    else
      turn.tool_calls = [
        {
          name: "run_shell_command",
          arguments: { command: `ls ${t} && wc -l` /* no ";": vLLM's parser splits on it */, timeout: 10 * t },
        },
      ];
    return turn;
  });
}

async function session(stack: Stack, random: () => number, turns: ScriptTurn[]) {
  const result = await scriptedSession(stack, random, turns, {
    check: (answer, expected) => {
      // A turn with a call is the call alone; a text answer is the text.
      assert.equal(answer.content, expected.tool_calls ? null : expected.content);
      assert.equal(answer.reasoning ?? null, null);
    },
  });
  // Llama's template trims a text answer and writes a call the way the model wrote it: nothing to put back.
  assert.deepEqual(
    result.calls.flatMap((c) => c.repairs ?? []),
    [],
  );
  return result;
}

describe("Llama 3.x (llama3_json tool calls) end to end", () => {
  for (const prompts of ["tokens", "messages"] as const) {
    test(`${prompts} mode: sessions with calls, text before them and text answers are one trajectory`, async () => {
      for (let s = 0; s < 3; s++) {
        const random = seededRandom(500 + s);
        const turns = script(random, 3 + Math.floor(random() * 3));
        const stack = await startStack({
          sim: { script: turns, toolCallParser: "llama3_json" },
          gateway: { prompts, model: llama3ChatFormat() },
        });
        try {
          const { calls, stats } = await session(stack, random, turns);
          if (prompts === "tokens") for (const call of calls) assert.equal(call.prompt?.mode, "tokens");
          // Every prompt is a Llama prompt: BOS, then the system turn.
          for (const call of calls) assert.deepEqual(call.promptTokenIds?.slice(0, 3), [128000, 128006, 9125]);
          assertOneTrajectory(stats);
        } finally {
          await stack.close();
        }
      }
    });
  }
});

describe("rlgate serve --model-dir with Llama 3.2's files", () => {
  test("the family is picked from the template; the built-in sim answers in Llama's syntax, tokens mode parses it", async () => {
    await withModelDirServe(llama3Files(), /llama3_json tool calls/, async (url) => {
      const call = await simShellCall(url);
      assert.equal(call.promptTokenIds?.[0], 128000);
    });
  });
});
