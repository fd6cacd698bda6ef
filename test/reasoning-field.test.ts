// A golden pair: the same scripted agent session through the gateway against a vLLM that answers reasoning as
// `reasoning` (>= 0.17) and one that answers `reasoning_content` (<= 0.16), each harness echoing the name it got,
// streamed and whole calls mixed, in both prompt modes. The capture (prompt ids, sampled ids, logprobs) and the
// trajectories must be the same: only the name of the field differs on the wire.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { PromptModeName } from "../gateway/prompts/index.ts";
import type { ReasoningField } from "../tokenizer/reasoning-field.ts";
import {
  AGENT_SCRIPT,
  createRollout,
  postJson,
  readSse,
  rolloutCalls,
  startStack,
  streamedMessage,
  TOOLS,
} from "./helpers.ts";

type Json = Record<string, any>;

/** A stream's message, reading reasoning under `field` only (what a harness reading that name gets). */
function streamedAs(events: unknown[], field: ReasoningField): Json {
  const { content, reasoning, tool_calls } = streamedMessage(events, field);
  return { content: content ?? "", [field]: reasoning ?? "", tool_calls };
}

async function session(field: ReasoningField, prompts: PromptModeName) {
  const stack = await startStack({
    sim: { reasoningField: field, script: AGENT_SCRIPT, seed: 4 },
    gateway: { reasoningField: field, prompts },
  });
  try {
    const rollout = await createRollout(stack.gateway.url, { harness: "echo" });
    const url = `${rollout.base_urls.openai}/chat/completions`;
    const messages: Json[] = [{ role: "user", content: "How many files are here?" }];
    const reasoning: string[] = [];
    for (let turn = 0; turn < AGENT_SCRIPT.length; turn++) {
      const stream = turn % 2 === 0;
      const body = { model: "Qwen/Qwen3-8B", messages, tools: TOOLS, stream };
      let message: Json;
      if (stream) {
        const res = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        message = streamedAs(await readSse(res), field);
      } else {
        const res = await postJson(url, body);
        assert.equal(res.status, 200, res.text);
        message = res.json.choices[0].message;
        const other = field === "reasoning" ? "reasoning_content" : "reasoning";
        assert.equal(other in message, false, `no ${other} beside ${field}`);
      }
      reasoning.push(message[field]);
      const calls = message.tool_calls?.length ? message.tool_calls : undefined;
      messages.push({ role: "assistant", content: message.content, [field]: message[field], tool_calls: calls });
      for (const call of calls ?? []) messages.push({ role: "tool", tool_call_id: call.id, content: `out ${turn}` });
    }
    await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
    const records = await rolloutCalls(stack.gateway.url, rollout.id);
    // Call seqs are clock-based: compared by their place in the rollout.
    const seqs = records.map((c) => c.seq);
    const placed = (value: unknown): unknown =>
      JSON.parse(JSON.stringify(value), (key, v) => (key === "callSeq" || key === "call_seq" ? seqs.indexOf(v) : v));
    const calls = records.map((c) => ({
      prompt: c.promptTokenIds,
      choices: c.choices.map((ch) => [ch.tokenIds, ch.logprobs]),
      repairs: placed(c.repairs ?? []),
    }));
    const rec = await (await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/trajectories`)).json();
    const trajectories = placed((rec as Json).trajectories.map((t: Json) => ({ segment: t.segment, spans: t.spans })));
    return { reasoning, calls, trajectories, breaks: (rec as Json).breaks };
  } finally {
    await stack.close();
  }
}

for (const prompts of ["messages", "tokens"] as const) {
  describe(`${prompts} mode`, () => {
    test("reasoning answered as `reasoning` or as `reasoning_content` gives the same capture and trajectories", async () => {
      const current = await session("reasoning", prompts);
      const legacy = await session("reasoning_content", prompts);
      assert.ok(
        current.reasoning.every((r) => typeof r === "string" && r.length > 0),
        "every turn carried reasoning",
      );
      assert.deepEqual(legacy.reasoning, current.reasoning);
      assert.deepEqual(legacy.calls, current.calls);
      assert.deepEqual(legacy.trajectories, current.trajectories);
      assert.deepEqual(current.breaks, []);
      assert.equal((current.trajectories as unknown[]).length, 1);
    });
  });
}
