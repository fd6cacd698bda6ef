// The sim answers reasoning under the name of the vLLM version it stands for (`reasoning` from 0.17, default;
// `reasoning_content` before), whole and streamed, and renders a history message's reasoning as that version does.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { ReasoningField } from "../tokenizer/reasoning-field.ts";
import { startSim, type SimServer } from "./index.ts";
import { assembleChat, postJson, postSse, SHELL_TOOL, type Json } from "./test-helpers.ts";

const USER = [{ role: "user", content: "List the files here." }];
const OTHER: Record<ReasoningField, ReasoningField> = {
  reasoning: "reasoning_content",
  reasoning_content: "reasoning",
};

/** A tool chain after the last user message: Qwen3's template writes its assistant turn's reasoning. */
function chain(reasoning: Json): Json[] {
  return [
    ...USER,
    {
      role: "assistant",
      content: "",
      ...reasoning,
      tool_calls: [{ id: "c1", type: "function", function: { name: "bash", arguments: '{"command":"ls"}' } }],
    },
    { role: "tool", tool_call_id: "c1", content: "a.txt" },
  ];
}

for (const field of ["reasoning", "reasoning_content"] as const) {
  describe(`--reasoning-field ${field}`, () => {
    let sim: SimServer;
    before(async () => {
      sim = await startSim({ port: 0, seed: 3, ...(field === "reasoning" ? {} : { reasoningField: field }) });
    });
    after(() => sim.close());
    const url = () => `${sim.url}/v1/chat/completions`;

    test("the whole answer and the stream carry reasoning under this name only", async () => {
      const body = { messages: USER, tools: [SHELL_TOOL], seed: 1 };
      const whole = (await postJson(url(), body)).body;
      const message = whole["choices"][0]["message"] as Json;
      assert.equal(typeof message[field], "string");
      assert.ok(message[field].length > 0);
      assert.equal(OTHER[field] in message, false);

      const streamed = await postSse(url(), { ...body, stream: true });
      const deltas = streamed.chunks.flatMap((c) => (c["choices"] as Json[]).map((ch) => ch["delta"] as Json));
      assert.equal(deltas.filter((d) => OTHER[field] in d).length, 0);
      const text = deltas.map((d) => (typeof d[field] === "string" ? d[field] : "")).join("");
      assert.equal(text, message[field]);
      if (field === "reasoning") assert.equal(assembleChat(streamed.chunks)[0]!.reasoning, message[field]);
    });

    test("a history message's reasoning is rendered under the names this version reads", async () => {
      const ids = async (reasoning: Json) =>
        (await postJson(url(), { messages: chain(reasoning), return_token_ids: true, max_tokens: 1 })).body[
          "prompt_token_ids"
        ] as number[];
      const none = await ids({});
      const current = await ids({ reasoning: "I will list." });
      const legacy = await ids({ reasoning_content: "I will list." });
      assert.notDeepEqual(current, none);
      // vLLM >= 0.17 drops `reasoning_content` from the history (vllm-project/vllm#38488); older ones read either.
      assert.deepEqual(legacy, field === "reasoning" ? none : current);
    });
  });
}
