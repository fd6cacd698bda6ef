// Golden tests with the real Qwen3 chat template and tokenizer for what real harness sessions did to trajectories
// (issue 13), one per cause, each against what history repair (or the harness) sends instead:
// (1) vLLM's "\n\n" content before a tool call echoed back; (2) a Messages/Responses text block keeping vLLM's "\n"
// before a tool call; (3) thinking off, and reasoning dropped (a BPE re-merge on the generation prompt's last token):
// re-serializations, not branches; (4) a title call made first is auxiliary, the agent is main; (5) Claude Code's
// compaction under a system prompt with a per-conversation hash is a compaction, and a sub-agent started from a
// tool call's arguments is not; (6) which segments train, and untrained segments take no token from trained ones.
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

const TOOLS = [tool("read_file", { path: "string" }), tool("task", { prompt: "string" })];
const SYSTEM: ChatMessage = { role: "system", content: "You are a careful coding agent." };
const USER: ChatMessage = { role: "user", content: "Fix the sum in src/a.py." };
const read = (path: string, reasoning: string, content = ""): Turn => ({
  reasoning,
  content,
  toolCalls: [{ name: "read_file", arguments: { path } }],
});
const answer = (content: string, reasoning: string | null = "Done."): Turn => ({ reasoning, content, toolCalls: [] });
const ranges = (...calls: RecordedCall[]): Array<[number, number]> =>
  calls.map((c) => [c.prompt.length, c.prompt.length + c.completions[0]!.length]);

/** Two turns, the first calling a tool; `history` is the assistant message the next prompt holds for it. */
function twoTurns(first: Turn, history: ChatMessage, options: { firstThinking?: boolean } = {}) {
  const log = new CallLog();
  const messages: ChatMessage[] = [SYSTEM, USER];
  const c1 = log.chat(messages, [first], { tools: TOOLS, enableThinking: options.firstThinking });
  messages.push(history, toolMessage("def total(n): ..."));
  const c2 = log.chat(messages, [answer("Fixed it.")], { tools: TOOLS });
  return { rec: reconstructRollout(log.calls, { rolloutId: "r" }), c1, c2 };
}

function assertOneTrajectory(rec: ReturnType<typeof reconstructRollout>, c1: RecordedCall, c2: RecordedCall): void {
  assert.deepEqual(
    rec.calls.map((c) => c.attach?.kind),
    ["root", "extend"],
  );
  assert.deepEqual(rec.breaks, []);
  const [t] = rec.trajectories as [Trajectory];
  assert.equal(rec.trajectories.length, 1);
  assert.deepEqual([...t.lossMask], maskOf(t.tokenIds.length, ranges(c1, c2)));
  assert.equal(rec.stats.amplification, 1);
}

describe("golden: real harness sessions (Qwen3)", () => {
  it('(1) content "\\n\\n" before a tool call echoed back: a break right after </think>; content "" extends', () => {
    const turn = read("src/a.py", "Read it first.");
    const echoed = twoTurns(turn, verbatimAssistantMessage(turn));
    assert.equal(verbatimAssistantMessage(turn).content, "\n\n");
    const thinkClose = qwen3Tokenizer().encode("</think>")[0]!;
    const after = echoed.c1.completions[0]!.indexOf(thinkClose) + 1;
    assert.deepEqual(
      echoed.rec.breaks.map((b) => [b.kind, b.offsetInCompletion]),
      [["reserialization", after]],
    );
    assert.equal(echoed.rec.trajectories.length, 2);
    const repaired = twoTurns(turn, { ...verbatimAssistantMessage(turn), content: "" });
    assertOneTrajectory(repaired.rec, repaired.c1, repaired.c2);
  });

  it("(2) a text block keeping vLLM's \"\\n\" before a tool call: a break at the content's end; without it, extends", () => {
    const turn = read("src/a.py", "Look at it.", "Let me look.");
    // Messages and Responses carry vLLM's content as a text block: "\n\nLet me look.\n".
    const block = verbatimAssistantMessage(turn);
    assert.equal(block.content, "\n\nLet me look.\n");
    const echoed = twoTurns(turn, block);
    const [b] = echoed.rec.breaks;
    assert.equal(b?.kind, "reserialization");
    const completion = echoed.c1.completions[0]!;
    const toolOpen = qwen3Tokenizer().encode("<tool_call>")[0]!;
    assert.ok(
      b!.offsetInCompletion! > completion.indexOf(toolOpen) - 3 &&
        b!.offsetInCompletion! <= completion.indexOf(toolOpen),
    );
    const repaired = twoTurns(turn, { ...block, content: "\n\nLet me look." });
    assertOneTrajectory(repaired.rec, repaired.c1, repaired.c2);
  });

  it("(3) thinking off: the next prompt drops the empty think block of the generation prompt — a re-serialization", () => {
    const turn: Turn = {
      reasoning: null,
      content: "",
      toolCalls: [{ name: "read_file", arguments: { path: "src/a.py" } }],
    };
    const sent = twoTurns(turn, assistantMessage(turn), { firstThinking: false });
    assert.ok(qwen3Tokenizer().decode(sent.c1.prompt.slice(-4)) === "<think>\n\n</think>\n\n");
    // Parts at `<think>` of the generation prompt: 4 tokens before call 1's completion, named after the turn it belongs to.
    assert.deepEqual(
      sent.rec.breaks.map((b) => [b.kind, b.from?.callSeq, b.offsetInCompletion]),
      [["reserialization", 1, -4]],
    );
    assert.equal(sent.rec.stats.breaks.branch, 0);
    // Repair sends reasoning_content "\n": the template writes the empty think block again.
    const repaired = twoTurns(turn, { ...assistantMessage(turn), reasoning_content: "\n" }, { firstThinking: false });
    assertOneTrajectory(repaired.rec, repaired.c1, repaired.c2);
  });

  it("(3b) reasoning dropped, content sent as vLLM returned it: a BPE re-merge on the generation prompt's last token", () => {
    const turn = read("src/a.py", "Look at it.", "Let me look.");
    const dropped = { ...verbatimAssistantMessage(turn) };
    delete dropped.reasoning_content;
    const sent = twoTurns(turn, dropped);
    // "assistant\n" + "\n\nLet me look." tokenizes "\n\n\n" as one token: the prompts part on the generation prompt's
    // "\n", one token before the sampled `<think>`.
    assert.deepEqual(
      sent.rec.breaks.map((b) => [b.kind, b.at, b.offsetInCompletion]),
      [["reserialization", sent.c1.prompt.length - 1, -1]],
    );
    const repaired = twoTurns(turn, { ...dropped, reasoning_content: "\nLook at it.\n", content: "\n\nLet me look." });
    assertOneTrajectory(repaired.rec, repaired.c1, repaired.c2);
  });

  it("(4) a title call made first is auxiliary and the agent is main, wherever the title call comes", () => {
    for (const titleAt of [0, 1]) {
      const log = new CallLog();
      const messages: ChatMessage[] = [SYSTEM, USER];
      const title = () =>
        log.chat(
          [{ role: "system", content: "Write a 3-word title for this conversation." }, USER],
          [answer("Fix sum bug", null)],
          { tools: [] },
        );
      if (titleAt === 0) title();
      const t1 = read("src/a.py", "Read it.");
      const m1 = log.chat(messages, [t1], { tools: TOOLS });
      if (titleAt === 1) title();
      messages.push(assistantMessage(t1), toolMessage("def total(n): ..."));
      const m2 = log.chat(messages, [answer("Fixed it.")], { tools: TOOLS });
      const rec = reconstructRollout(log.calls, { rolloutId: "r4" });
      assert.deepEqual(
        rec.segments.map((s) => [s.kind, s.trained]),
        titleAt === 0
          ? [
              ["auxiliary", false],
              ["main", true],
            ]
          : [
              ["main", true],
              ["auxiliary", false],
            ],
      );
      assert.deepEqual(
        rec.calls.map((c) => c.attach?.kind),
        titleAt === 0 ? ["auxiliary", "root", "extend"] : ["root", "auxiliary", "extend"],
      );
      assert.deepEqual(rec.breaks, [], "a side call is no break");
      assert.equal(rec.flags.flagged, false);
      const main = rec.trajectories.find((t) => t.segment === "main")!;
      assert.deepEqual([...main.lossMask], maskOf(main.tokenIds.length, ranges(m1, m2)));
      assert.equal(rec.stats.trainedTokens, m1.completions[0]!.length + m2.completions[0]!.length);
    }
  });

  it("(4b) only one-shot calls without tools: main cannot be told, and the rollout says so", () => {
    const log = new CallLog();
    log.chat([{ role: "system", content: "Write a title." }, USER], [answer("Sum bug", null)], { tools: [] });
    log.chat([SYSTEM, USER], [answer("Change range(n + 1) to range(n).")], { tools: [] });
    const rec = reconstructRollout(log.calls, { rolloutId: "r4b" });
    assert.equal(rec.flags.flagged, true);
    assert.match(rec.flags.mainUnclear ?? "", /no thread is an agent: 2 one-shot calls without tools/);
    assert.ok(rec.flags.reasons.some((r) => r.startsWith("main agent unclear")));
    // A single plain call is simply main.
    const one = new CallLog();
    one.chat([SYSTEM, USER], [answer("Hi.")], { tools: [] });
    const single = reconstructRollout(one.calls, { rolloutId: "r4c" });
    assert.deepEqual([single.segments[0]!.kind, single.flags.flagged], ["main", false]);
  });

  it("(5) Claude Code's compaction: a new thread from the summary, system prompt with another session hash → compaction", () => {
    const log = new CallLog();
    const system = (hash: string): ChatMessage => ({
      role: "system",
      content: `You are Claude Code.\nSession: ${hash}\nUse the tools.`,
    });
    const main: ChatMessage[] = [system("3f2a91c0"), USER];
    const t1 = read("src/a.py", "Read it.");
    log.chat(main, [t1], { tools: TOOLS });
    main.push(assistantMessage(t1), toolMessage("def total(n):\n    return sum(range(n + 1))"));
    // A sub-agent whose task is written in the main agent's tool-call arguments is no summary: it stays a sub-agent.
    const task = "Search the repository for every caller of total() and report the file paths with line numbers.";
    const spawn: Turn = {
      reasoning: "Delegate the search.",
      content: "",
      toolCalls: [{ name: "task", arguments: { prompt: task } }],
    };
    log.chat(main, [spawn], { tools: TOOLS });
    main.push(assistantMessage(spawn), toolMessage("src/app.py:12"));
    log.chat(
      [
        { role: "system", content: "You are a search sub-agent." },
        { role: "user", content: task },
      ],
      [answer("src/app.py:12")],
      { tools: TOOLS },
    );
    main.push({ role: "user", content: "Summarize the conversation so far." });
    const summary =
      "The user asked to fix total() in src/a.py, which sums range(n + 1) and so includes n once too often. " +
      "The only caller is src/app.py line 12. Next step: change the range to range(n) and run the tests.";
    log.chat(main, [answer(summary, "Summarize.")], { tools: TOOLS });
    const fresh: ChatMessage[] = [
      system("9b1c77d4"),
      { role: "user", content: `This session continues an earlier one.\nSummary: ${summary}\nContinue.` },
    ];
    const edit = read("src/a.py", "Re-open it.");
    log.chat(fresh, [edit], { tools: TOOLS });
    fresh.push(assistantMessage(edit), toolMessage("def total(n): ..."));
    log.chat(fresh, [answer("Changed range(n + 1) to range(n).")], { tools: TOOLS });

    const rec = reconstructRollout(log.calls, { rolloutId: "r5" });
    assert.deepEqual(
      rec.calls.map((c) => c.attach?.kind),
      ["root", "extend", "sub_agent", "auxiliary", "compaction", "extend"],
    );
    // Call 4 asked for the summary at the end of main's history: the summarizer, auxiliary (issue 28).
    assert.deepEqual(
      rec.segments.map((s) => [s.kind, s.parentId, s.callSeqs]),
      [
        ["main", null, [1, 2]],
        ["sub_agent", 0, [3]],
        ["compaction", 0, [5, 6]],
        ["auxiliary", 0, [4]],
      ],
    );
    const compaction = rec.breaks.find((b) => b.kind === "compaction")!;
    assert.deepEqual(compaction.from, { callSeq: 4, choiceIndex: 0 }, "the call that wrote the summary");
    assert.ok(compaction.at < 20, "the threads part in the system prompt's hash line");
  });

  it("(5b) a summarizer of its own (another system prompt, no tools): auxiliary, and the compaction hangs under main", () => {
    const log = new CallLog();
    const main: ChatMessage[] = [SYSTEM, USER];
    const t1 = read("src/a.py", "Read it.");
    log.chat(main, [t1], { tools: TOOLS });
    main.push(assistantMessage(t1), toolMessage("def total(n):\n    return sum(range(n + 1))"));
    log.chat(main, [read("tests/test_a.py", "Read the test.")], { tools: TOOLS });
    const summary =
      "The user asked to fix total() in src/a.py, which sums range(n + 1) and so includes n once too often; " +
      "tests/test_a.py expects total(3) == 3. Next step: change the range to range(n) and run the tests.";
    const transcript = "user: Fix the sum in src/a.py.\nassistant: read src/a.py\ntool: def total(n): ...";
    log.chat(
      [
        { role: "system", content: "You summarize coding sessions." },
        { role: "user", content: transcript },
      ],
      [answer(summary, "Summarize.")],
      { tools: [] },
    );
    const fresh: ChatMessage[] = [SYSTEM, { role: "user", content: `Continue from this summary: ${summary}` }];
    log.chat(fresh, [read("src/a.py", "Re-open it.")], { tools: TOOLS });
    const rec = reconstructRollout(log.calls, { rolloutId: "r5b" });
    assert.deepEqual(
      rec.segments.map((s) => [s.kind, s.parentId, s.callSeqs]),
      [
        ["main", null, [1, 2]],
        ["auxiliary", 0, [3]],
        ["compaction", 0, [4]],
      ],
    );
    assert.deepEqual(
      rec.calls.map((c) => c.attach?.kind),
      ["root", "extend", "auxiliary", "compaction"],
    );
    assert.deepEqual(
      rec.breaks.map((b) => [b.kind, b.from?.callSeq]),
      [["compaction", 3]],
    );
    assert.equal(rec.flags.flagged, false);
  });

  it("(6) which segments train: untrained ones mark only what no trained trajectory trains", () => {
    // Turns without reasoning render back as sampled, so a fork that keeps the first turn shares its sampled tokens.
    const plainRead = (path: string): Turn => ({
      reasoning: null,
      content: "",
      toolCalls: [{ name: "read_file", arguments: { path } }],
    });
    const log = new CallLog();
    const main: ChatMessage[] = [SYSTEM, USER];
    const calls: RecordedCall[] = [];
    for (const [i, path] of ["src/a.py", "tests/test_a.py"].entries()) {
      calls.push(log.chat(main, [plainRead(path)], { tools: TOOLS }));
      main.push(assistantMessage(plainRead(path)), toolMessage(`output ${i}`));
    }
    calls.push(log.chat(main, [plainRead("src/b.py")], { tools: TOOLS }));
    main.push(assistantMessage(plainRead("src/b.py")), toolMessage("output 2"));
    // A fork that keeps the first turn only and asks something else, while the main history goes on.
    const forkMessages: ChatMessage[] = [
      SYSTEM,
      USER,
      assistantMessage(plainRead("src/a.py")),
      toolMessage("output 0"),
      { role: "user", content: "What does total(0) give?" },
    ];
    const fork = log.chat(forkMessages, [answer("0.", null)], { tools: TOOLS });
    calls.push(log.chat(main, [answer("Fixed: range(n).", null)], { tools: TOOLS }));
    const rec = reconstructRollout(log.calls, { rolloutId: "r6" });
    assert.deepEqual(
      rec.segments.map((s) => [s.kind, s.callSeqs]),
      [
        ["main", [1, 2, 3, 5]],
        ["sub_agent", [4]],
      ],
    );
    const [forkT, mainT] = rec.trajectories as [Trajectory, Trajectory];
    assert.equal(forkT.segment, "sub_agent");
    assert.ok(
      commonPrefix([...forkT.tokenIds], [...mainT.tokenIds]) > calls[0]!.prompt.length + 3,
      "the fork holds call 1's sampled turn",
    );
    // The fork comes first, yet main trains call 1's turn: the fork shows it as shared and marks only its own answer.
    assert.deepEqual([...mainT.lossMask], maskOf(mainT.tokenIds.length, ranges(...calls)));
    assert.deepEqual([...forkT.lossMask], maskOf(forkT.tokenIds.length, ranges(fork)));
    assert.deepEqual(
      forkT.spans.map((s) => [s.callSeq, s.kind]),
      [
        [1, "shared"],
        [4, "untrained"],
      ],
    );
    const all = reconstructRollout(log.calls, { rolloutId: "r6", trainSegments: ["main", "sub_agent"] });
    assert.ok(all.trajectories.every((t) => t.trained));
    assert.equal(all.stats.trainedTokens, all.stats.sampledTokens);
  });
});
