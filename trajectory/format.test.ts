import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ChatMessage } from "../tokenizer/chat-template.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { formatReconstruction, formatTrajectory } from "./format.ts";
import { reconstructionToJson } from "./json.ts";
import { reconstructRollout } from "./reconstruct.ts";
import { assistantMessage, CallLog, tool, toolMessage, type Turn } from "./testing/qwen3-session.ts";

const TOOLS = [tool("read_file", { path: "string" })];

function demo() {
  const log = new CallLog();
  const main: ChatMessage[] = [
    { role: "system", content: "You are an agent." },
    { role: "user", content: "Read a.txt" },
  ];
  const read: Turn = {
    reasoning: "Read it.",
    content: "",
    toolCalls: [{ name: "read_file", arguments: { path: "a.txt" }, raw: '{"path":"a.txt"}' }],
  };
  log.chat(main, [read], { tools: TOOLS });
  main.push(assistantMessage(read), toolMessage("hello world"));
  const done: Turn = { reasoning: "Done.", content: "It says hello world.", toolCalls: [] };
  log.chat(main, [done], { tools: TOOLS, tokenSource: "retokenized" });
  log.chat(
    [
      { role: "system", content: "You are a sub agent." },
      { role: "user", content: "x" },
    ],
    [done],
  );
  log.chat(main, [done], { status: "upstream_error" });
  return reconstructRollout(log.calls, { rolloutId: "demo", reward: 1 });
}

describe("format", () => {
  const tok = qwen3Tokenizer();
  const detokenize = (ids: readonly number[]): string => tok.decode(ids);

  it("renders the tree, breaks and each trajectory with sampled spans in brackets when colour is off", () => {
    const rec = demo();
    const text = formatReconstruction(rec, { detokenize, maxContextChars: 80 });
    assert.match(text, /^rollout demo · 4 calls \(3 in tree\) · 3 leaves, 0 dead · 3 trajectories \(2 trained\)/);
    assert.match(text, /FLAGGED: retokenized ids: calls 2/);
    assert.match(text, /failed calls \(not trained\): #4/);
    assert.match(text, /#0 main \(trained\) · calls #1 #2/);
    assert.match(text, /#1 sub_agent ← #0 \(not trained\) · calls #3/);
    assert.match(
      text,
      /#2 main#0 reserialization @\d+ in #1\.0's completion at \+\d+ \(-\d+ old \/ \+\d+ new tokens\)/,
    );
    assert.match(text, /#4 not in tree \(upstream_error\)/);
    // Trained span, the same tokens shared on the next path, the break marker, untrusted ids, elided context.
    assert.ok(
      text.includes(
        '⟦#1.0 <think>\nRead it.\n</think>\n\n<tool_call>\n{"name": "read_file", "arguments": {"path":"a.txt"}}\n</tool_call><|im_end|>⟧',
      ),
    );
    assert.ok(
      text.includes(
        '⟨#1.0 <think>\nRead it.\n</think>\n\n<tool_call>\n{"name": "read_file", "arguments": {"path⟩⌁reserialization #2⌁": "a.txt"}}',
      ),
    );
    assert.ok(text.includes("⟪#2.0! <think>\nDone.\n</think>\n\nIt says hello world.<|im_end|>⟫"));
    assert.ok(text.includes("You are⌁sub_agent #3⌁ a sub agent."));
    assert.match(text, / … \d+ context tokens … /);
    assert.ok(!text.includes("\x1b["), "no ANSI codes with colour off");
  });

  it("uses ANSI colours instead of brackets when colour is on, and shows everything with an unlimited context", () => {
    const rec = demo();
    const t = rec.trajectories[0]!;
    const text = formatTrajectory(t, { detokenize, color: true, maxContextChars: Infinity });
    assert.ok(text.includes("\x1b[32m<think>\nRead it."), "trained span in green");
    assert.ok(!text.includes("⟦"));
    assert.ok(text.includes(tok.decode([...t.tokenIds.subarray(0, t.spans[0]!.start)])), "context in full");
  });

  it("serializes trajectories to JSON with plain arrays and null for unknown logprobs", () => {
    const rec = demo();
    const json = reconstructionToJson(rec);
    const round = JSON.parse(JSON.stringify(json)) as typeof json;
    const t = round.trajectories[0]!;
    assert.deepEqual(t.tokenIds, Array.from(rec.trajectories[0]!.tokenIds));
    assert.deepEqual(t.lossMask, Array.from(rec.trajectories[0]!.lossMask));
    assert.equal(t.logprobs.length, t.tokenIds.length);
    const nan = reconstructionToJson(
      reconstructRollout(
        [
          {
            callSeq: 1,
            promptIds: [1, 2],
            choices: [{ index: 0, tokenIds: [3], logprobs: null, finishReason: "stop" }],
            tokenSource: "upstream",
            status: "ok",
            startedAt: 0,
          },
        ],
        { rolloutId: "x" },
      ),
    );
    assert.deepEqual(nan.trajectories[0]!.logprobs, [0, 0, null]);
    assert.deepEqual(nan.flags.missingLogprobs, [1]);
  });
});
