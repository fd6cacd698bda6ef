// Golden tests with the real Qwen3 chat template and tokenizer: how a harness's history rendering shapes the tree.
// (1) a linear tool-using session; (1b) a second user query, after which the template strips old reasoning ((1d) of
// an answer echoed with its leading newlines); (2) a harness that drops reasoning_content; (2b) tool arguments the
// model wrote in another JSON spelling.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ChatMessage } from "../tokenizer/chat-template.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { reconstructRollout } from "./reconstruct.ts";
import {
  assistantMessage,
  CallLog,
  commonPrefix,
  maskOf,
  tool,
  toolMessage,
  verbatimAssistantMessage,
  type RecordedCall,
  type Turn,
} from "./testing/qwen3-session.ts";
import type { Trajectory } from "./types.ts";

const TOOLS = [tool("read_file", { path: "string" }), tool("write_file", { path: "string", content: "string" })];
const SYSTEM: ChatMessage = { role: "system", content: "You are a careful coding agent." };

const TURNS: Turn[] = [
  {
    reasoning: "I should read the file first.",
    content: "",
    toolCalls: [{ name: "read_file", arguments: { path: "src/a.py" } }],
  },
  {
    reasoning: "The bug is an off-by-one in the loop.",
    content: "Found it.",
    toolCalls: [
      { name: "write_file", arguments: { path: "src/a.py", content: "for i in range(n):\n    total += i\n" } },
    ],
  },
  {
    reasoning: "Now check the tests.",
    content: "",
    toolCalls: [{ name: "read_file", arguments: { path: "tests/test_a.py" } }],
  },
  { reasoning: "Tests cover it.", content: "Fixed the off-by-one in `src/a.py`.", toolCalls: [] },
];
const TOOL_OUTPUTS = [
  "for i in range(n + 1):\n    total += i\n",
  "ok: 34 bytes written",
  "def test_sum(): assert total(3) == 3",
];

/**
 * Runs the tool loop over TURNS. History: "trimmed" sends reasoning_content and content back without the newlines
 * around them, "verbatim" sends vLLM's parsed fields as they are, "no-reasoning" drops reasoning_content.
 */
function toolSession(
  log: CallLog,
  messages: ChatMessage[],
  history: "trimmed" | "verbatim" | "no-reasoning",
): RecordedCall[] {
  const recorded: RecordedCall[] = [];
  TURNS.forEach((turn, i) => {
    recorded.push(log.chat(messages, [turn], { tools: TOOLS }));
    messages.push(
      history === "verbatim"
        ? verbatimAssistantMessage(turn)
        : assistantMessage(turn, { keepReasoning: history === "trimmed" }),
    );
    if (i < TOOL_OUTPUTS.length) messages.push(toolMessage(TOOL_OUTPUTS[i]!));
  });
  return recorded;
}

/** [start, end) of each call's completion when its prompt is a prefix of the trajectory. */
function sampledRanges(calls: RecordedCall[]): Array<[number, number]> {
  return calls.map((c) => [c.prompt.length, c.prompt.length + c.completions[0]!.length]);
}

function assertLogprobs(t: Trajectory, call: RecordedCall, start = call.prompt.length): void {
  const lps = call.logprobs[0]!;
  for (let k = 0; k < lps.length; k++) {
    assert.equal(t.logprobs[start + k], Math.fround(lps[k]!), `logprob of call ${call.callSeq} token ${k}`);
  }
}

function assertContextLogprobsZero(t: Trajectory): void {
  for (let i = 0; i < t.tokenIds.length; i++)
    if (t.lossMask[i] === 0 && !t.spans.some((s) => s.start <= i && i < s.end)) {
      assert.equal(t.logprobs[i], 0, `context logprob at ${i}`);
    }
}

describe("golden: history rendering (Qwen3)", () => {
  it("(1) a linear tool-using session is one trajectory; mask 1 is exactly the sampled tokens", () => {
    const log = new CallLog();
    const calls = toolSession(log, [SYSTEM, { role: "user", content: "Fix the sum in src/a.py." }], "trimmed");
    // Within one user query the template keeps <think> of every earlier turn (they follow the last user message),
    // so each prompt starts with the previous prompt + completion, token for token.
    for (let i = 1; i < calls.length; i++) {
      const prev = [...calls[i - 1]!.prompt, ...calls[i - 1]!.completions[0]!];
      assert.deepEqual(calls[i]!.prompt.slice(0, prev.length), prev, `call ${i + 1} extends call ${i}`);
    }
    const rec = reconstructRollout(log.calls, { rolloutId: "r1", reward: 0.5 });
    assert.equal(rec.trajectories.length, 1);
    const [t] = rec.trajectories as [Trajectory];
    const last = calls[calls.length - 1]!;
    assert.deepEqual([...t.tokenIds], [...last.prompt, ...last.completions[0]!]);
    assert.deepEqual([...t.lossMask], maskOf(t.tokenIds.length, sampledRanges(calls)));
    for (const c of calls) assertLogprobs(t, c);
    assertContextLogprobsZero(t);
    assert.deepEqual(
      t.spans.map((s) => [s.start, s.end, s.callSeq, s.kind]),
      calls.map((c) => [c.prompt.length, c.prompt.length + c.completions[0]!.length, c.callSeq, "trained"]),
    );
    assert.equal(t.trajectoryId, "r1:4:0");
    assert.equal(t.segment, "main");
    assert.equal(t.reward, 0.5);
    assert.deepEqual(t.breaks, []);
    assert.deepEqual(
      rec.calls.map((c) => c.attach?.kind),
      ["root", "extend", "extend", "extend"],
    );
    assert.equal(rec.stats.uniqueTokens, t.tokenIds.length);
    assert.equal(rec.stats.amplification, 1);
    assert.equal(
      rec.stats.trainedTokens,
      calls.reduce((n, c) => n + c.completions[0]!.length, 0),
    );
    assert.equal(rec.flags.flagged, false);
    // The mask-1 tokens decode to exactly the model's turns (think included), ending with <|im_end|>.
    const tok = qwen3Tokenizer();
    const trainedText = t.spans.map((s) => tok.decode([...t.tokenIds.subarray(s.start, s.end)]));
    assert.match(trainedText[0]!, /^<think>\nI should read the file first\.\n<\/think>\n\n<tool_call>/);
    assert.ok(trainedText.every((text) => text.endsWith("<|im_end|>")));
  });

  it("(1d) an answer echoed with vLLM's leading newlines loses its <think> to a new query: the newlines merge with the generation prompt's, a break one token early, still reasoning_dropped", () => {
    const log = new CallLog();
    const messages: ChatMessage[] = [SYSTEM, { role: "user", content: "Anything to fix?" }];
    const answer: Turn = { reasoning: "Nothing to do.", content: "Done.", toolCalls: [] };
    const first = log.chat(messages, [answer]);
    messages.push(verbatimAssistantMessage(answer), { role: "user", content: "Then add a docstring." });
    const second = log.chat(messages, [{ reasoning: "Add it.", content: "Added.", toolCalls: [] }]);
    const rec = reconstructRollout(log.calls, { rolloutId: "r1c" });
    // `assistant\n` + "\n\nDone." is written `assistant` + "\n\n\n" + "Done.": the prompt parts one token early.
    assert.equal(commonPrefix(second.prompt, [...first.prompt, ...first.completions[0]!]), first.prompt.length - 1);
    assert.deepEqual(
      rec.breaks.map((b) => [b.kind, b.offsetInCompletion, b.cause]),
      [["reserialization", -1, "reasoning_dropped"]],
    );
  });

  it("(1b) a second user query re-renders earlier turns without <think>: a break at the first sampled token", () => {
    const log = new CallLog();
    const messages: ChatMessage[] = [SYSTEM, { role: "user", content: "Fix the sum in src/a.py." }];
    const first = toolSession(log, messages, "trimmed");
    messages.push({ role: "user", content: "Also add a docstring." });
    const followUp: Turn = {
      reasoning: "Add a docstring.",
      content: "",
      toolCalls: [{ name: "write_file", arguments: { path: "src/a.py", content: '"""Sum."""' } }],
    };
    const second = log.chat(messages, [followUp], { tools: TOOLS });
    const rec = reconstructRollout(log.calls, { rolloutId: "r1b" });

    const firstPrompt = first[0]!.prompt;
    // The template drops reasoning of turns before the last user query: the new prompt leaves the tree exactly where
    // call 1's sampled tokens begin (`<think>` sampled, plain content rendered).
    assert.equal(commonPrefix(second.prompt, [...firstPrompt, ...first[0]!.completions[0]!]), firstPrompt.length);
    assert.deepEqual(rec.breaks, [
      {
        kind: "reserialization",
        callSeq: 5,
        at: firstPrompt.length,
        from: { callSeq: 1, choiceIndex: 0 },
        offsetInCompletion: 0,
        oldTokens: first[0]!.completions[0]!.length,
        newTokens: second.prompt.length - firstPrompt.length,
        cause: "reasoning_dropped",
      },
    ]);
    assert.equal(rec.trajectories.length, 2);
    const [a, b] = rec.trajectories as [Trajectory, Trajectory];
    assert.equal(a.trajectoryId, "r1b:4:0");
    assert.deepEqual([...a.lossMask], maskOf(a.tokenIds.length, sampledRanges(first)));
    assert.equal(b.trajectoryId, "r1b:5:0");
    assert.deepEqual([...b.tokenIds], [...second.prompt, ...second.completions[0]!]);
    assert.deepEqual([...b.lossMask], maskOf(b.tokenIds.length, sampledRanges([second])));
    assert.deepEqual(
      b.breaks.map((x) => x.callSeq),
      [5],
    );
    assertLogprobs(b, second);
    assert.equal(rec.stats.breaks.reserialization, 1);
    assert.equal(rec.stats.trainedTokens, rec.stats.sampledTokens);
  });

  it("(1c) vLLM's parsed fields passed back verbatim: content before a tool call gains a newline, reasoning is shared", () => {
    const log = new CallLog();
    const calls = toolSession(log, [SYSTEM, { role: "user", content: "Fix the sum in src/a.py." }], "verbatim");
    const rec = reconstructRollout(log.calls, { rolloutId: "r1c" });
    // The template writes "\n" before a tool call whenever content is non-empty, and vLLM's content of a turn that
    // calls tools is at least "\n\n": every tool-calling turn re-renders differently right after `</think>`.
    assert.deepEqual(
      rec.calls.map((c) => c.attach?.kind),
      ["root", "reserialization", "reserialization", "reserialization"],
    );
    const tok = qwen3Tokenizer();
    const thinkClose = tok.encode("</think>")[0]!;
    const toolOpen = tok.encode("<tool_call>")[0]!;
    for (let i = 1; i < calls.length; i++) {
      const b = rec.breaks[i - 1]!;
      const completion = calls[i - 1]!.completions[0]!;
      const afterThink = completion.indexOf(thinkClose) + 1;
      if (TURNS[i - 1]!.content === "")
        assert.equal(b.offsetInCompletion, afterThink, `break ${i} right after </think>`);
      else {
        // "Found it.\n<tool_call>" sampled, "Found it.\n\n<tool_call>" rendered: the break is at the content's end.
        assert.ok(b.offsetInCompletion! > afterThink + 1 && b.offsetInCompletion! < completion.indexOf(toolOpen) + 1);
        assert.equal(tok.decode(completion.slice(afterThink, b.offsetInCompletion!)).trim().startsWith("Found"), true);
      }
    }
    assert.equal(rec.trajectories.length, calls.length);
    rec.trajectories.forEach((t, i) => {
      const c = calls[i]!;
      const ranges: Array<[number, number]> = [[c.prompt.length, c.prompt.length + c.completions[0]!.length]];
      assert.deepEqual([...t.lossMask], maskOf(t.tokenIds.length, ranges), `trajectory ${i}`);
      // The reasoning of the previous turn is on this path too, but trained in that turn's own trajectory.
      if (i > 0) assert.equal(t.spans.filter((s) => s.kind === "shared").length, i);
    });
    assert.equal(rec.stats.trainedTokens, rec.stats.sampledTokens);
  });

  it("(2) a harness that drops reasoning_content: every turn is its own leaf, each sampled token trained once", () => {
    const log = new CallLog();
    const calls = toolSession(log, [SYSTEM, { role: "user", content: "Fix the sum in src/a.py." }], "no-reasoning");
    const rec = reconstructRollout(log.calls, { rolloutId: "r2" });
    assert.deepEqual(
      rec.calls.map((c) => c.attach?.kind),
      ["root", "reserialization", "reserialization", "reserialization"],
    );
    for (let i = 1; i < calls.length; i++) {
      // Without reasoning_content the template renders the turn as plain content: it parts at the `<think>` token.
      const b = rec.breaks[i - 1]!;
      assert.equal(b.at, calls[i - 1]!.prompt.length);
      assert.deepEqual(b.from, { callSeq: i, choiceIndex: 0 });
      assert.equal(b.offsetInCompletion, 0);
    }
    assert.equal(rec.trajectories.length, calls.length);
    rec.trajectories.forEach((t, i) => {
      const c = calls[i]!;
      assert.deepEqual([...t.tokenIds], [...c.prompt, ...c.completions[0]!]);
      assert.deepEqual([...t.lossMask], maskOf(t.tokenIds.length, sampledRanges([c])), `trajectory ${i}`);
      assertLogprobs(t, c);
      assertContextLogprobsZero(t);
      assert.deepEqual(
        t.breaks.map((x) => x.callSeq),
        calls.slice(1, i + 1).map((x) => x.callSeq),
      );
    });
    const total = calls.reduce((n, c) => n + c.prompt.length + c.completions[0]!.length, 0);
    assert.equal(rec.stats.trajectoryTokens, total);
    assert.ok(rec.stats.amplification > 2, `amplification ${rec.stats.amplification}`);
    assert.equal(
      rec.stats.trainedTokens,
      calls.reduce((n, c) => n + c.completions[0]!.length, 0),
    );
  });

  it("(2b) tool arguments written as compact JSON are re-rendered by the template: the shared part trains once", () => {
    const log = new CallLog();
    const messages: ChatMessage[] = [SYSTEM, { role: "user", content: "Read src/a.py." }];
    const turn: Turn = {
      reasoning: "Read it.",
      content: "",
      toolCalls: [{ name: "read_file", arguments: { path: "src/a.py" }, raw: '{"path":"src/a.py"}' }],
    };
    const c1 = log.chat(messages, [turn], { tools: TOOLS });
    messages.push(assistantMessage(turn), toolMessage("print('hi')"));
    const c2 = log.chat(messages, [{ reasoning: "Done.", content: "It prints hi.", toolCalls: [] }], { tools: TOOLS });
    const rec = reconstructRollout(log.calls, { rolloutId: "r2b" });

    const s1 = [...c1.prompt, ...c1.completions[0]!];
    const at = commonPrefix(c2.prompt, s1);
    const offset = at - c1.prompt.length;
    assert.ok(offset > 5 && offset < c1.completions[0]!.length - 3, `diverges inside the arguments (offset ${offset})`);
    assert.deepEqual(
      rec.breaks.map((b) => [b.kind, b.callSeq, b.at, b.offsetInCompletion]),
      [["reserialization", 2, at, offset]],
    );
    const [t1, t2] = rec.trajectories as [Trajectory, Trajectory];
    assert.deepEqual([...t1.lossMask], maskOf(s1.length, [[c1.prompt.length, s1.length]]));
    // The sampled prefix the new prompt still shares (think, `<tool_call>`, the name) is trained in call 1's
    // trajectory only; in call 2's it is sampled-but-shared, with its logprobs kept.
    assert.deepEqual([...t2.lossMask], maskOf(t2.tokenIds.length, [[c2.prompt.length, t2.tokenIds.length]]));
    assert.deepEqual(
      t2.spans.map((s) => [s.start, s.end, s.callSeq, s.kind]),
      [
        [c1.prompt.length, at, 1, "shared"],
        [c2.prompt.length, t2.tokenIds.length, 2, "trained"],
      ],
    );
    for (let k = 0; k < offset; k++) assert.equal(t2.logprobs[c1.prompt.length + k], Math.fround(c1.logprobs[0]![k]!));
    assert.equal(rec.stats.trainedTokens, c1.completions[0]!.length + c2.completions[0]!.length);
  });
});
