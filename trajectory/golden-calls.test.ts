// Golden tests with the real Qwen3 chat template and tokenizer: what the calls themselves do.
// (3) a retry and regenerations after a malformed tool call; (6) parallel tool calls and n > 1 siblings;
// (7) calls whose upstream gave no token ids, or whose ids were retokenized.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ChatMessage } from "../tokenizer/chat-template.ts";
import { reconstructRollout } from "./reconstruct.ts";
import {
  assistantMessage,
  CallLog,
  commonPrefix,
  maskOf,
  tool,
  toolMessage,
  type Turn,
} from "./testing/qwen3-session.ts";
import type { Trajectory } from "./types.ts";

const TOOLS = [tool("read_file", { path: "string" }), tool("grep", { pattern: "string", path: "string" })];
const START: ChatMessage[] = [
  { role: "system", content: "You are a coding agent." },
  { role: "user", content: "Where is `parse_config` defined?" },
];
const GREP: Turn = {
  reasoning: "Search for the definition.",
  content: "",
  toolCalls: [{ name: "grep", arguments: { pattern: "def parse_config", path: "." } }],
};

function seq(...parts: number[][]): number[] {
  return parts.flat();
}

describe("golden: calls (Qwen3)", () => {
  it("(3) a retry after a cut-off answer and a regeneration after a malformed tool call leave dead leaves", () => {
    const log = new CallLog();
    const messages = [...START];
    const c1 = log.chat(messages, [GREP], { tools: TOOLS });
    messages.push(assistantMessage(GREP), toolMessage("src/config.py:12:def parse_config(path):"));
    const truncated: Turn = { reasoning: "It is in src/config.py at line 12, let me", content: "", toolCalls: [] };
    const malformed: Turn = {
      reasoning: "Open the file.",
      content: "",
      toolCalls: [{ name: "read_file", arguments: {}, raw: '{"path": "src/config.py"' }],
    };
    const good: Turn = {
      reasoning: "Open the file.",
      content: "",
      toolCalls: [{ name: "read_file", arguments: { path: "src/config.py" } }],
    };
    log.chat(messages, [good], { tools: TOOLS, status: "upstream_error" }); // 2: failed upstream, retried
    const c3 = log.chat(messages, [truncated], { tools: TOOLS, stopped: [false] }); // 3: cut by max_tokens, retried
    const c4 = log.chat(messages, [malformed], { tools: TOOLS }); // 4: unparsable tool call, regenerated
    const c5 = log.chat(messages, [good], { tools: TOOLS }); // 5: kept
    messages.push(assistantMessage(good), toolMessage("def parse_config(path):\n    return toml.load(path)"));
    const answer: Turn = { reasoning: "Answer.", content: "In `src/config.py`, line 12.", toolCalls: [] };
    const c6 = log.chat(messages, [answer], { tools: TOOLS });
    const rec = reconstructRollout(log.calls, { rolloutId: "r3" });

    assert.deepEqual(
      rec.calls.map((c) => [c.callSeq, c.attach?.kind ?? null, c.choices[0]!.fate]),
      [
        [1, "root", "inner"],
        [2, null, "not_in_tree"],
        [3, "extend", "dead"],
        [4, "retry", "dead"],
        [5, "retry", "inner"],
        [6, "extend", "leaf"],
      ],
    );
    assert.deepEqual(
      rec.breaks.map((b) => [b.kind, b.callSeq, b.at, b.from?.callSeq, b.oldTokens, b.newTokens]),
      [
        ["retry", 4, c3.prompt.length, 3, c3.completions[0]!.length, 0],
        ["retry", 5, c4.prompt.length, 4, c4.completions[0]!.length, 0],
      ],
    );
    assert.equal(rec.trajectories.length, 1);
    const [t] = rec.trajectories as [Trajectory];
    assert.deepEqual([...t.tokenIds], seq(c6.prompt, c6.completions[0]!));
    // Trained: call 1, the kept regeneration (5) and the answer (6). The dead attempts share `<think>\n…` with call
    // 5, but on this path those tokens are call 5's own, with call 5's logprobs.
    const ranges: Array<[number, number]> = [c1, c5, c6].map((c) => [
      c.prompt.length,
      c.prompt.length + c.completions[0]!.length,
    ]);
    assert.deepEqual([...t.lossMask], maskOf(t.tokenIds.length, ranges));
    assert.deepEqual(
      t.spans.map((s) => s.callSeq),
      [1, 5, 6],
    );
    c5.logprobs[0]!.forEach((lp, k) => assert.equal(t.logprobs[c5.prompt.length + k], Math.fround(lp)));
    assert.deepEqual(
      t.breaks.map((b) => b.callSeq),
      [4, 5],
    );
    assert.equal(rec.stats.leaves, 3);
    assert.equal(rec.stats.deadLeaves, 2);
    assert.equal(rec.stats.retainedTrajectories, 1);
    assert.deepEqual(rec.flags.failedCalls, [2]);
    assert.equal(rec.flags.flagged, false);
    // Dead samples are in the tree (unique tokens) but trained nowhere.
    assert.ok(rec.stats.sampledTokens > rec.stats.trainedTokens);
  });

  it("(6) parallel tool calls render back exactly; n > 1 siblings are leaves whose shared prefix trains once", () => {
    const log = new CallLog();
    const messages = [...START];
    const parallel: Turn = {
      reasoning: "Search two places at once.",
      content: "Searching.",
      toolCalls: [
        { name: "grep", arguments: { pattern: "parse_config", path: "src" } },
        { name: "grep", arguments: { pattern: "parse_config", path: "tests" } },
      ],
    };
    const c1 = log.chat(messages, [parallel], { tools: TOOLS });
    messages.push(
      assistantMessage(parallel),
      toolMessage("src/config.py:12", "call_0"),
      toolMessage("tests/t.py:3", "call_1"),
    );
    const pick: Turn = {
      reasoning: "Open the source file.",
      content: "",
      toolCalls: [{ name: "read_file", arguments: { path: "src/config.py" } }],
    };
    const other: Turn = {
      reasoning: "Open the test file.",
      content: "",
      toolCalls: [{ name: "read_file", arguments: { path: "tests/t.py" } }],
    };
    const c2 = log.chat(messages, [pick, other], { tools: TOOLS }); // n = 2; the harness continues with choice 0
    messages.push(assistantMessage(pick), toolMessage("def parse_config(path): ..."));
    const c3 = log.chat(messages, [{ reasoning: "Done.", content: "src/config.py:12", toolCalls: [] }], {
      tools: TOOLS,
    });
    const rec = reconstructRollout(log.calls, { rolloutId: "r6" });

    // Both tool calls and both tool responses round-trip: call 2 extends call 1 token for token.
    assert.deepEqual(
      rec.calls.map((c) => c.attach?.kind),
      ["root", "extend", "extend"],
    );
    assert.deepEqual(
      rec.calls[1]!.choices.map((c) => c.fate),
      ["inner", "leaf"],
    );
    assert.deepEqual(rec.breaks, []);
    const shared = commonPrefix(c2.completions[0]!, c2.completions[1]!);
    assert.ok(shared >= 3, "siblings share `<think>\\nOpen the`");
    assert.equal(rec.trajectories.length, 2);
    const [sibling, main] = rec.trajectories as [Trajectory, Trajectory];
    // Leaves are ordered by their call: the sibling (call 2, choice 1) comes first and trains the shared prefix.
    assert.equal(sibling.trajectoryId, "r6:2:1");
    assert.deepEqual([...sibling.tokenIds], seq(c2.prompt, c2.completions[1]!));
    const p1 = c1.prompt.length;
    const p2 = c2.prompt.length;
    const s1End = p1 + c1.completions[0]!.length;
    assert.deepEqual(
      [...sibling.lossMask],
      maskOf(sibling.tokenIds.length, [
        [p1, s1End],
        [p2, sibling.tokenIds.length],
      ]),
    );
    assert.equal(main.trajectoryId, "r6:3:0");
    assert.deepEqual(
      [...main.lossMask],
      maskOf(main.tokenIds.length, [
        [p2 + shared, p2 + c2.completions[0]!.length],
        [c3.prompt.length, main.tokenIds.length],
      ]),
    );
    assert.deepEqual(
      main.spans.map((s) => [s.start, s.end, s.callSeq, s.choiceIndex, s.kind]),
      [
        [p1, s1End, 1, 0, "shared"],
        [p2, p2 + shared, 2, 0, "shared"],
        [p2 + shared, p2 + c2.completions[0]!.length, 2, 0, "trained"],
        [c3.prompt.length, main.tokenIds.length, 3, 0, "trained"],
      ],
    );
    // Each choice keeps its own logprobs, shared prefix included.
    c2.logprobs[1]!.forEach((lp, k) => assert.equal(sibling.logprobs[p2 + k], Math.fround(lp)));
    c2.logprobs[0]!.forEach((lp, k) => assert.equal(main.logprobs[p2 + k], Math.fround(lp)));
    const sampled =
      c1.completions[0]!.length +
      c2.completions[0]!.length +
      c2.completions[1]!.length -
      shared +
      c3.completions[0]!.length;
    assert.equal(rec.stats.sampledTokens, sampled);
    assert.equal(rec.stats.trainedTokens, sampled);
  });

  it("(7) a call whose upstream gave no token ids is context and flags the rollout", () => {
    const log = new CallLog();
    const messages = [...START];
    const c1 = log.chat(messages, [GREP], { tools: TOOLS });
    messages.push(assistantMessage(GREP), toolMessage("src/config.py:12:def parse_config(path):"));
    const lost: Turn = {
      reasoning: "Read it.",
      content: "",
      toolCalls: [{ name: "read_file", arguments: { path: "src/config.py" } }],
    };
    const c2 = log.chat(messages, [lost], {
      tools: TOOLS,
      tokenSource: "missing",
      tokenIssue: "the upstream reported no prompt token ids",
    });
    messages.push(assistantMessage(lost), toolMessage("def parse_config(path): ..."));
    const c3 = log.chat(messages, [{ reasoning: "Done.", content: "Line 12.", toolCalls: [] }], { tools: TOOLS });
    const rec = reconstructRollout(log.calls, { rolloutId: "r7" });

    assert.deepEqual(
      rec.calls.map((c) => c.attach?.kind ?? null),
      ["root", null, "extend"],
    );
    assert.equal(rec.trajectories.length, 1);
    const [t] = rec.trajectories as [Trajectory];
    // Call 2's turn is in call 3's prompt, so it is in the trajectory, as context: never trained without its ids.
    const c2Start = c2.prompt.length;
    assert.deepEqual(
      t.tokenIds.subarray(c2Start, c2Start + c2.completions[0]!.length).join(),
      c2.completions[0]!.join(),
    );
    assert.deepEqual(
      [...t.lossMask],
      maskOf(t.tokenIds.length, [
        [c1.prompt.length, c1.prompt.length + c1.completions[0]!.length],
        [c3.prompt.length, t.tokenIds.length],
      ]),
    );
    assert.deepEqual(
      t.spans.map((s) => s.callSeq),
      [1, 3],
    );
    assert.deepEqual(rec.flags.missingTokenIds, [2]);
    assert.equal(rec.flags.flagged, true);
    assert.deepEqual(rec.flags.reasons, ["no token ids: calls 2", "call 2: the upstream reported no prompt token ids"]);
  });

  it("(7b) retokenized ids enter the tree untrusted: their span is shown, never trained, logprob 0", () => {
    const log = new CallLog();
    const messages = [...START];
    log.chat(messages, [GREP], { tools: TOOLS });
    messages.push(assistantMessage(GREP), toolMessage("src/config.py:12:def parse_config(path):"));
    const turn: Turn = {
      reasoning: "Read it.",
      content: "",
      toolCalls: [{ name: "read_file", arguments: { path: "src/config.py" } }],
    };
    const c2 = log.chat(messages, [turn], { tools: TOOLS, tokenSource: "retokenized" });
    messages.push(assistantMessage(turn), toolMessage("def parse_config(path): ..."));
    const c3 = log.chat(messages, [{ reasoning: "Done.", content: "Line 12.", toolCalls: [] }], { tools: TOOLS });
    const rec = reconstructRollout(log.calls, { rolloutId: "r7b" });

    assert.deepEqual(
      rec.calls.map((c) => c.attach?.kind),
      ["root", "extend", "extend"],
    );
    const [t] = rec.trajectories as [Trajectory];
    const span = t.spans.find((s) => s.callSeq === 2)!;
    assert.deepEqual(
      [span.start, span.end, span.kind],
      [c2.prompt.length, c2.prompt.length + c2.completions[0]!.length, "untrusted"],
    );
    for (let i = span.start; i < span.end; i++) {
      assert.equal(t.lossMask[i], 0);
      assert.equal(t.logprobs[i], 0);
    }
    assert.equal(
      t.lossMask.subarray(c3.prompt.length).every((m) => m === 1),
      true,
    );
    assert.deepEqual(rec.flags.retokenized, [2]);
    assert.equal(rec.flags.flagged, true);
  });
});
