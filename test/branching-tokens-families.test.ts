// Branches cut at a token position in the other built-in families: Llama 3.x, gpt-oss (harmony: a turn of several
// messages, mostly special tokens) and DeepSeek V3.1 (the model's turn right after a tool output, no header). The
// scripted sim continues the turn it was cut in, as for Qwen3 (branching-tokens.test.ts), so the harness gets the
// backbone's answers, whole or streamed, and the branch's call holds the backbone's ids.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { GPTOSS_VOCAB_SIZE } from "../tokenizer/gptoss.ts";
import { DEEPSEEK_V31_VOCAB_SIZE } from "../tokenizer/deepseek-v31.ts";
import { LLAMA3_VOCAB_SIZE } from "../tokenizer/llama3.ts";
import { deepSeekV31ChatFormat, gptossChatFormat, llama3ChatFormat } from "../tokenizer/model-format.ts";
import { finish, runAgent, stableTool, type Message } from "./branching-agent.ts";
import { AGENT_SCRIPT, createRollout, rolloutCalls, startStack } from "./helpers.ts";

function seen(message: Message) {
  return {
    content: message.content || null,
    reasoning: message.reasoning || null,
    calls: (message.tool_calls ?? []).map((c: any) => [c.function.name, c.function.arguments]),
  };
}

const FAMILIES = [
  { parser: "llama3_json", format: llama3ChatFormat, vocabSize: LLAMA3_VOCAB_SIZE },
  { parser: "openai", format: gptossChatFormat, vocabSize: GPTOSS_VOCAB_SIZE },
  { parser: "deepseek_v31", format: deepSeekV31ChatFormat, vocabSize: DEEPSEEK_V31_VOCAB_SIZE },
] as const;

for (const family of FAMILIES) {
  describe(`branches at a token position, ${family.parser}`, () => {
    test("cuts of call 1 continue the backbone's turn, whole and streamed", async () => {
      const stack = await startStack({
        sim: { script: AGENT_SCRIPT, toolCallParser: family.parser },
        gateway: { prompts: "tokens", model: family.format(), vocabSize: family.vocabSize },
      });
      try {
        const url = stack.gateway.url;
        // A branch replays its backbone's calls, so a streamed branch needs a streamed backbone (else it diverges).
        for (const stream of [false, true]) {
          const backbone = await createRollout(url, { group: "g" });
          const base = await runAgent(backbone.base_urls.openai, stableTool, { stream });
          assert.equal(base.answers.length, 3);
          await finish(url, backbone.id, 1);
          const sampled = (await rolloutCalls(url, backbone.id))[1]!.choices[0]!.tokenIds;
          const cuts = stream ? [2, sampled.length - 1] : [1, Math.floor(sampled.length / 2)];
          for (const atToken of cuts) {
            const branch = await createRollout(url, {
              group: "g",
              branch: { of: backbone.id, at_call: 1, at_token: atToken },
            });
            const run = await runAgent(branch.base_urls.openai, stableTool, { stream });
            assert.equal(run.status, 200, run.error);
            const where = `cut at ${atToken} of ${sampled.length}, streamed ${stream}`;
            assert.deepEqual(run.answers.map(seen), base.answers.map(seen), where);
            const call = (await rolloutCalls(url, branch.id))[1]!;
            assert.deepEqual(call.promptTokenIds!.slice(-atToken), sampled.slice(0, atToken), `kept ids, ${where}`);
            assert.deepEqual(call.choices[0]!.tokenIds, sampled.slice(atToken), `the rest of the turn, ${where}`);
          }
        }
      } finally {
        await stack.close();
      }
    });
  });
}
