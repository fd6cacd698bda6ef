// rlgate export rebuilds a rollout's trajectories after the fact: for a model family other than Qwen3 it must read the
// ids with that family's turn ids (`--model-dir`), or it parts them otherwise than the gateway that recorded them.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ChatMessage } from "../tokenizer/chat-template.ts";
import { llama3ChatFormat } from "../tokenizer/model-format.ts";
import { testCallRecord } from "../store/test-support.ts";
import type { RolloutRecord } from "../store/records.ts";
import { chatFormatOf } from "../trajectory/index.ts";
import { exportRows } from "./export.ts";

const model = llama3ChatFormat();
const ids = (messages: ChatMessage[]) => model.encode(model.render(messages));

const ROLLOUT: RolloutRecord = {
  id: "r1",
  key: "rlk_r1",
  group: null,
  task: null,
  harness: null,
  metadata: {},
  status: "ok",
  reward: 1,
  createdAt: 0,
  finishedAt: 1,
};

/** A call whose prompt is `messages` and whose sampled answer is `answer` (ended by the family's turn end). */
function call(seq: number, messages: ChatMessage[], answer: string) {
  const sampled = [...model.encode(answer), ...model.encode(model.family.markup.turnEnd)];
  return testCallRecord({
    seq,
    promptTokenIds: ids(messages),
    choices: [{ index: 0, tokenIds: sampled, logprobs: sampled.map(() => -0.5), finishReason: "stop" }],
  });
}

test("export --model-dir: a Llama 3.x rollout's sub-agent (its own system prompt) is told from main as the gateway tells it", () => {
  const task = { role: "user", content: "Fix the failing test in the repository." } as const;
  const calls = [
    call(1, [{ role: "system", content: "You are a coding agent. Work in the repository." }, task], "I will look."),
    call(2, [{ role: "system", content: "You are a search sub-agent. Report what you find." }, task], "Found it."),
  ];
  const withFamily = exportRows(ROLLOUT, calls, { chatFormat: chatFormatOf(model) });
  assert.deepStrictEqual(
    withFamily.map((r) => r.segment),
    ["main", "sub_agent"],
  );
  // Read with Qwen3's turn ids (the default), Llama's system turn is not found: the sub-agent is not told apart.
  const asQwen = exportRows(ROLLOUT, calls);
  assert.notDeepStrictEqual(
    asQwen.map((r) => r.segment),
    ["main", "sub_agent"],
  );
});
