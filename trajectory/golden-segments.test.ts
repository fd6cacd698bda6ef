// Golden tests with the real Qwen3 chat template and tokenizer: several agent contexts in one rollout.
// (4) a sub-agent with its own system prompt, interleaved in time with the main agent; (5) a compaction that restarts
// the history from a summary; (5b) the same restart while the old history goes on is a fork, not a compaction.
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
  type RecordedCall,
  type Turn,
} from "./testing/qwen3-session.ts";
import type { Trajectory } from "./types.ts";

const MAIN_TOOLS = [
  tool("task", { description: "string", prompt: "string" }),
  tool("task_output", { id: "string" }),
  tool("read_file", { path: "string" }),
];
const SUB_TOOLS = [tool("read_file", { path: "string" }), tool("grep", { pattern: "string" })];
const MAIN_SYSTEM: ChatMessage = {
  role: "system",
  content: "You are the lead engineer. Delegate searches to sub-agents.",
};
const SUB_SYSTEM: ChatMessage = { role: "system", content: "You are a search sub-agent. Report file paths only." };

function call(name: string, args: Record<string, unknown>, reasoning: string, content = ""): Turn {
  return { reasoning, content, toolCalls: [{ name, arguments: args }] };
}
function answer(content: string, reasoning = "Done."): Turn {
  return { reasoning, content, toolCalls: [] };
}
function ranges(...calls: RecordedCall[]): Array<[number, number]> {
  return calls.map((c) => [c.prompt.length, c.prompt.length + c.completions[0]!.length]);
}

describe("golden: segments (Qwen3)", () => {
  it("(4) a background sub-agent interleaved with the main agent is its own segment, not trained by default", () => {
    const log = new CallLog();
    const main: ChatMessage[] = [MAIN_SYSTEM, { role: "user", content: "Why does the config loader crash?" }];
    const sub: ChatMessage[] = [SUB_SYSTEM, { role: "user", content: "Find where parse_config is called." }];
    const spawn = call(
      "task",
      { description: "find callers", prompt: "Find where parse_config is called." },
      "Delegate the search.",
    );
    const m1 = log.chat(main, [spawn], { tools: MAIN_TOOLS });
    main.push(assistantMessage(spawn), toolMessage("task t1 started in the background"));
    const grep = call("grep", { pattern: "parse_config(" }, "Grep for calls.");
    const s1 = log.chat(sub, [grep], { tools: SUB_TOOLS });
    sub.push(assistantMessage(grep), toolMessage("src/app.py:40\nsrc/cli.py:12"));
    const read = call("read_file", { path: "src/config.py" }, "Meanwhile read the loader.");
    const m2 = log.chat(main, [read], { tools: MAIN_TOOLS });
    main.push(assistantMessage(read), toolMessage("def parse_config(path):\n    return toml.load(open(path))"));
    const report = answer("src/app.py:40, src/cli.py:12");
    const s2 = log.chat(sub, [report], { tools: SUB_TOOLS });
    const wait = call("task_output", { id: "t1" }, "Collect the sub-agent's result.");
    const m3 = log.chat(main, [wait], { tools: MAIN_TOOLS });
    main.push(assistantMessage(wait), toolMessage("src/app.py:40, src/cli.py:12"));
    const m4 = log.chat(main, [answer("`open(path)` is text mode; toml.load needs binary.")], { tools: MAIN_TOOLS });

    const rec = reconstructRollout(log.calls, { rolloutId: "r4" });
    const at = commonPrefix(s1.prompt, m1.prompt);
    assert.ok(at >= 3 && at < 10, "main and sub-agent part inside `<|im_start|>system\\nYou are …`");
    assert.deepEqual(
      rec.calls.map((c) => [c.callSeq, c.attach?.kind, c.attach?.segmentId]),
      [
        [1, "root", 0],
        [2, "sub_agent", 1],
        [3, "extend", 0],
        [4, "extend", 1],
        [5, "extend", 0],
        [6, "extend", 0],
      ],
    );
    assert.deepEqual(
      rec.segments.map((s) => [s.id, s.kind, s.parentId, s.callSeqs, s.trained]),
      [
        [0, "main", null, [1, 3, 5, 6], true],
        [1, "sub_agent", 0, [2, 4], false],
      ],
    );
    assert.deepEqual(
      rec.breaks.map((b) => [b.kind, b.callSeq, b.at, b.from?.callSeq]),
      [["sub_agent", 2, at, 1]],
    );
    const [subT, mainT] = rec.trajectories as [Trajectory, Trajectory];
    assert.equal(subT.trajectoryId, "r4:4:0");
    assert.equal(subT.segment, "sub_agent");
    assert.equal(subT.trained, false);
    // Not trained here, but its mask says what it would train (an RL core may train sub-agents): spans "untrained".
    assert.deepEqual([...subT.lossMask], maskOf(subT.tokenIds.length, ranges(s1, s2)));
    assert.ok(subT.spans.every((s) => s.kind === "untrained"));
    assert.deepEqual(
      subT.breaks.map((b) => b.callSeq),
      [2],
    );
    assert.equal(mainT.trajectoryId, "r4:6:0");
    assert.deepEqual([...mainT.lossMask], maskOf(mainT.tokenIds.length, ranges(m1, m2, m3, m4)));
    assert.deepEqual(mainT.breaks, []);
    assert.equal(rec.stats.retainedTrajectories, 1);
    assert.equal(rec.stats.untrainedTrajectories, 1);

    // Training sub-agents is a setting.
    const both = reconstructRollout(log.calls, { rolloutId: "r4", trainSegments: ["main", "sub_agent"] });
    const [subBoth] = both.trajectories as [Trajectory];
    assert.deepEqual([...subBoth.lossMask], maskOf(subBoth.tokenIds.length, ranges(s1, s2)));
    assert.equal(
      both.stats.trainedTokens,
      rec.stats.trainedTokens + s1.completions[0]!.length + s2.completions[0]!.length,
    );
  });

  it("(5) a compaction restarts the history from a summary under the same system prompt", () => {
    const log = new CallLog();
    const user: ChatMessage = { role: "user", content: "Migrate the config loader to tomllib." };
    const main: ChatMessage[] = [MAIN_SYSTEM, user];
    const read = call("read_file", { path: "src/config.py" }, "Read the loader.");
    const m1 = log.chat(main, [read], { tools: MAIN_TOOLS });
    main.push(
      assistantMessage(read),
      toolMessage("import toml\ndef parse_config(path):\n    return toml.load(open(path))"),
    );
    const read2 = call("read_file", { path: "pyproject.toml" }, "Check the Python version.");
    const m2 = log.chat(main, [read2], { tools: MAIN_TOOLS });
    main.push(assistantMessage(read2), toolMessage('requires-python = ">=3.11"'));
    // The harness's context is full: it asks for a summary (same history, one more user message)...
    main.push({ role: "user", content: "Summarize the conversation so far for a fresh context." });
    const summaryTurn = answer(
      "Task: migrate src/config.py from toml to tomllib; Python >= 3.11 is required.",
      "Summarize.",
    );
    const m3 = log.chat(main, [summaryTurn], { tools: MAIN_TOOLS });
    // ...and restarts from it.
    const compacted: ChatMessage[] = [
      MAIN_SYSTEM,
      { role: "user", content: `Summary of earlier work: ${summaryTurn.content}\nContinue.` },
    ];
    const edit = call("read_file", { path: "src/config.py" }, "Re-open the loader.");
    const c1 = log.chat(compacted, [edit], { tools: MAIN_TOOLS });
    compacted.push(assistantMessage(edit), toolMessage("import toml\n..."));
    const c2 = log.chat(compacted, [answer("Replaced toml with tomllib and opened the file in binary mode.")], {
      tools: MAIN_TOOLS,
    });

    const rec = reconstructRollout(log.calls, { rolloutId: "r5" });
    const at = commonPrefix(c1.prompt, m3.prompt);
    // The summary request adds a user message (so the template strips <think> from the turns before it: call 3
    // leaves the tree at call 1's first sampled token). Call 3 wrote the summary the compaction starts from and ends
    // main's history: the summarizer, an auxiliary segment of its own (issue 28), with no break of main.
    assert.deepEqual(
      rec.calls.map((c) => [c.callSeq, c.attach?.kind, c.attach?.segmentId]),
      [
        [1, "root", 0],
        [2, "extend", 0],
        [3, "auxiliary", 2],
        [4, "compaction", 1],
        [5, "extend", 1],
      ],
    );
    assert.deepEqual(
      rec.segments.map((s) => [s.kind, s.parentId, s.callSeqs]),
      [
        ["main", null, [1, 2]],
        ["compaction", 0, [4, 5]],
        ["auxiliary", 0, [3]],
      ],
    );
    assert.deepEqual(
      rec.breaks.map((b) => [b.kind, b.callSeq, b.at, b.from?.callSeq, b.oldTokens, b.newTokens]),
      [["compaction", 4, at, 3, m3.prompt.length + m3.completions[0]!.length - at, c1.prompt.length - at]],
    );
    assert.ok(at < m1.prompt.length, "the compaction parts from the history inside the first user message");
    const [beforeSummary, summary, compT] = rec.trajectories as [Trajectory, Trajectory, Trajectory];
    assert.equal(beforeSummary.trajectoryId, "r5:2:0");
    assert.deepEqual([...beforeSummary.lossMask], maskOf(beforeSummary.tokenIds.length, ranges(m1, m2)));
    assert.equal(summary.trajectoryId, "r5:3:0");
    assert.equal(summary.segment, "auxiliary");
    assert.equal(summary.trained, false);
    assert.deepEqual([...summary.lossMask], maskOf(summary.tokenIds.length, ranges(m3)));
    assert.equal(compT.trajectoryId, "r5:5:0");
    assert.equal(compT.segment, "compaction");
    assert.equal(compT.trained, false);
    assert.deepEqual([...compT.lossMask], maskOf(compT.tokenIds.length, ranges(c1, c2)));
    assert.ok(compT.spans.every((s) => s.kind === "untrained"));
    assert.deepEqual(
      compT.breaks.map((b) => b.kind),
      ["compaction"],
    );
    const all = reconstructRollout(log.calls, { rolloutId: "r5", trainSegments: ["main", "compaction"] });
    assert.deepEqual([...all.trajectories[2]!.lossMask], maskOf(compT.tokenIds.length, ranges(c1, c2)));
  });

  it("(5c) tokens mode: a summary request that extends main's last sequence is auxiliary, and main's trajectory ends before it", () => {
    const log = new CallLog();
    const main: ChatMessage[] = [MAIN_SYSTEM, { role: "user", content: "Migrate the config loader to tomllib." }];
    const read = call("read_file", { path: "src/config.py" }, "Read the loader.");
    const m1 = log.chat(main, [read], { tools: MAIN_TOOLS });
    // Tokens mode continues the thread from the sampled ids: the summary request extends call 1 exactly.
    const request = "\n<|im_start|>user\nSummarize the conversation so far for a fresh context.<|im_end|>\n";
    const summaryTurn = answer("Task: migrate src/config.py from toml to tomllib; it reads the file with toml.load.");
    const m2 = log.chat(main, [summaryTurn], { tools: MAIN_TOOLS });
    const extended = [
      ...m1.prompt,
      ...m1.completions[0]!,
      ...qwen3Tokenizer().encode(`${request}<|im_start|>assistant\n`),
    ];
    log.calls[1] = { ...log.calls[1]!, promptIds: extended };
    const compacted: ChatMessage[] = [
      MAIN_SYSTEM,
      { role: "user", content: `Summary of earlier work: ${summaryTurn.content}\nContinue.` },
    ];
    log.chat(compacted, [answer("Replaced toml with tomllib.")], { tools: MAIN_TOOLS });

    const rec = reconstructRollout(log.calls, { rolloutId: "r5c" });
    assert.deepEqual(
      rec.segments.map((s) => [s.kind, s.callSeqs]),
      [
        ["main", [1]],
        ["compaction", [3]],
        ["auxiliary", [2]],
      ],
    );
    assert.deepEqual(
      rec.breaks.map((b) => b.kind),
      ["compaction"],
    );
    const mainT = rec.trajectories.find((t) => t.segment === "main")!;
    assert.equal(mainT.trajectoryId, "r5c:1:0");
    assert.deepEqual([...mainT.lossMask], maskOf(mainT.tokenIds.length, ranges(m1)));
    const summarizer = rec.trajectories.find((t) => t.segment === "auxiliary")!;
    assert.equal(summarizer.trained, false);
    // It shares main's tokens and trains none of them; its own answer is what it would add.
    assert.equal(
      summarizer.lossMask.reduce((n, m) => n + m, 0),
      m2.completions[0]!.length,
    );
  });

  it("(5b) a same-system-prompt restart whose old history goes on is a fork (sub-agent), not a compaction", () => {
    const log = new CallLog();
    const main: ChatMessage[] = [MAIN_SYSTEM, { role: "user", content: "Audit the config loader." }];
    const read = call("read_file", { path: "src/config.py" }, "Read it.");
    log.chat(main, [read], { tools: MAIN_TOOLS });
    main.push(assistantMessage(read), toolMessage("def parse_config(path): ..."));
    const read2 = call("read_file", { path: "src/app.py" }, "Read the caller.");
    log.chat(main, [read2], { tools: MAIN_TOOLS });
    main.push(assistantMessage(read2), toolMessage("cfg = parse_config(args.path)"));
    // A helper context under the same system prompt, e.g. a sub-agent that reuses it...
    log.chat([MAIN_SYSTEM, { role: "user", content: "List the TOML keys used." }], [answer("name, version")], {
      tools: MAIN_TOOLS,
    });
    // ...while the main history continues.
    log.chat(main, [answer("The loader opens files in text mode.")], { tools: MAIN_TOOLS });
    const rec = reconstructRollout(log.calls, { rolloutId: "r5b" });
    assert.deepEqual(
      rec.calls.map((c) => c.attach?.kind),
      ["root", "extend", "sub_agent", "extend"],
    );
    assert.deepEqual(
      rec.segments.map((s) => [s.kind, s.callSeqs]),
      [
        ["main", [1, 2, 4]],
        ["sub_agent", [3]],
      ],
    );
    assert.deepEqual(
      rec.breaks.map((b) => [b.kind, b.callSeq]),
      [["sub_agent", 3]],
    );
  });
});
