// The scripted sessions a harness runs for the matrix and `rlgate harness-check`, written in the harness's own tool
// names (its HarnessScripting). The main session: text before a tool call, parallel tool calls (two at once, twice), a
// turn without thinking, eight model turns; the shell commands really run in the workspace and build all.txt = "12345".
// More sessions (docs/harnesses.md): `sub-agent` (the harness's sub-agent tool runs a step of its own), `long` (24
// model calls), `irregular` (tool calls that do not follow the schema to the letter), `continued` (three prompts, the
// later ones through the CLI's continue switch) and `compaction` (work, the harness's compaction, more work).
import type { HarnessScripting, ScriptedToolCall } from "../../runner/harnesses.ts";
import type { ScriptTurn } from "../../sim/index.ts";

/** What the shell commands of every session write into all.txt. */
export const EXPECTED = "12345";
const SUBTASK = "SUBTASK: write sub into sub.txt with the shell.";

const opening = (s: HarnessScripting, first: ScriptTurn): ScriptTurn[] =>
  Array<ScriptTurn>((s.cannedAssistantTurns ?? 0) + 1).fill(first);

/** The 8-turn main session. */
function mainSession(s: HarnessScripting): ScriptTurn[] {
  return [
    ...opening(s, {
      reasoning: "Start with the first file.",
      content: "I'll write f1 first.",
      tool_calls: [s.shell("printf 1 > f1")],
    }),
    { reasoning: "Two files at once.", tool_calls: [s.shell("printf 2 > f2"), s.shell("printf 3 > f3")] },
    { tool_calls: [s.shell("cat f1 f2 f3 > all.txt")] }, // no thinking this turn
    { reasoning: "Check its size.", tool_calls: [s.shell("wc -c all.txt")] },
    { reasoning: "Look around.", content: "Listing the files.", tool_calls: [s.shell("ls")] },
    { reasoning: "Two more files.", tool_calls: [s.shell("printf 4 > f4"), s.shell("printf 5 > f5")] },
    { reasoning: "Append them.", tool_calls: [s.shell("cat f4 f5 >> all.txt")] },
    { reasoning: "Everything is written.", content: `Done: all.txt holds ${EXPECTED}.` },
    ...(s.sideThreads ?? []),
  ];
}

/** A session with a sub-agent: main delegates a side file, the sub-agent writes it, main writes all.txt. */
function subAgentSession(s: HarnessScripting): ScriptTurn[] {
  // A harness's canned reply opens the sub-agent's conversation too (Qwen Code's).
  return [
    ...opening(s, {
      reasoning: "Delegate the side file.",
      content: "Delegating sub.txt.",
      tool_calls: [s.subAgent!(SUBTASK)],
    }),
    ...opening(s, { thread: "SUBTASK:", reasoning: "Write it.", tool_calls: [s.shell("printf sub > sub.txt")] }),
    { thread: "SUBTASK:", reasoning: "Written.", content: "sub.txt holds sub." },
    { reasoning: "Now the main file.", tool_calls: [s.shell(`printf ${EXPECTED} > all.txt`)] },
    { reasoning: "Done.", content: `Done: all.txt holds ${EXPECTED}.` },
    ...(s.sideThreads ?? []),
  ];
}

function reversedArguments(call: ScriptedToolCall): ScriptedToolCall {
  const args = call.arguments;
  return typeof args === "string" ? call : { ...call, arguments: Object.fromEntries(Object.entries(args).reverse()) };
}

/**
 * A session of 24 model calls: a shell call a turn, varied as a model varies them (every third turn two calls at
 * once, every fifth text before its call, every seventh without thinking, every fourth with its arguments in reverse
 * order — models do not keep a schema's key order, and harnesses that parse arguments with their schema write them
 * back in its order), the last turn answers.
 */
function longSession(s: HarnessScripting): ScriptTurn[] {
  const turns = opening(s, {
    reasoning: "Start.",
    content: "Writing the parts.",
    tool_calls: [s.shell("printf 1 > f1")],
  });
  for (let i = 2; i <= 22; i++) {
    const write = s.shell(`printf ${i % 10} > p${i}`);
    const calls = [i % 4 === 0 ? reversedArguments(write) : write, ...(i % 3 === 0 ? [s.shell(`wc -c p${i}`)] : [])];
    turns.push({
      ...(i % 7 === 0 ? {} : { reasoning: `Step ${i}: one more part.` }),
      ...(i % 5 === 0 ? { content: `Writing part ${i}.` } : {}),
      tool_calls: calls,
    });
  }
  turns.push({ reasoning: "Combine.", tool_calls: [s.shell(`printf ${EXPECTED} > all.txt`)] });
  turns.push({ reasoning: "Everything is written.", content: `Done: all.txt holds ${EXPECTED}.` });
  return [...turns, ...(s.sideThreads ?? [])];
}

/** Arguments as a model may write them: spaced around the colons, non-ASCII escaped (harnesses re-serialize both). */
function looselyWritten(call: ScriptedToolCall): ScriptedToolCall {
  if (typeof call.arguments === "string") return call;
  const fields = Object.entries(call.arguments).map(
    ([k, v]) =>
      `${JSON.stringify(k)} : ${JSON.stringify(v).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}`,
  );
  return { ...call, arguments: `{ ${fields.join(" , ")} }` };
}

const withArguments = (call: ScriptedToolCall, extra: Record<string, unknown>): ScriptedToolCall =>
  typeof call.arguments === "string" ? call : { ...call, arguments: { ...call.arguments, ...extra } };

/**
 * Tool calls as models write them when they do not follow the schema to the letter, each of which a harness may
 * write back otherwise than sampled (or refuse): text before two calls whose arguments are in reverse key order,
 * arguments spaced and escaped, an argument the schema does not have, a number given as a string, a command that
 * fails, the same call twice at once, several lines of text before a call without thinking.
 */
function irregularSession(s: HarnessScripting): ScriptTurn[] {
  return [
    ...opening(s, { reasoning: "Start.", content: "Writing the parts.", tool_calls: [s.shell("printf 1 > f1")] }),
    {
      reasoning: "Two at once, keys as they come.",
      content: "Two more parts.",
      tool_calls: [reversedArguments(s.shell("printf 2 > f2")), reversedArguments(s.shell("wc -c f2"))],
    },
    { reasoning: "Spaced arguments.", tool_calls: [looselyWritten(s.shell("printf 3 > f3 # café"))] },
    { reasoning: "An extra argument.", tool_calls: [withArguments(s.shell("printf 4 > f4"), { note: "extra" })] },
    { reasoning: "A number as a string.", tool_calls: [withArguments(s.shell("wc -c f4"), { timeout: "60000" })] },
    { reasoning: "This one fails.", tool_calls: [s.shell("cat missing-file")] },
    { reasoning: "The same call twice.", tool_calls: [s.shell("ls"), s.shell("ls")] },
    { content: "Next:\n\n- write f5\n- combine the parts\n", tool_calls: [s.shell("printf 5 > f5")] },
    { reasoning: "Combine.", tool_calls: [s.shell("cat f1 f2 f3 f4 f5 > all.txt")] },
    { reasoning: "Everything is written.", content: `Done: all.txt holds ${EXPECTED}.` },
    ...(s.sideThreads ?? []),
  ];
}

/** Three prompts in one session: the second and third continue the first (the harness's continue/resume switch). */
function continuedSession(s: HarnessScripting): ScriptTurn[] {
  return [
    ...Array<ScriptTurn>(s.cannedAssistantTurns ?? 0).fill({ content: "Ready." }),
    { reasoning: "First file.", content: "Writing f1.", tool_calls: [s.shell("printf 12 > f1")] },
    { reasoning: "Written.", content: "f1 holds 12." },
    { reasoning: "Second file.", tool_calls: [s.shell("printf 345 > f2")] },
    { reasoning: "Written.", content: "f2 holds 345." },
    { reasoning: "Combine them.", tool_calls: [s.shell("cat f1 f2 > all.txt")] },
    { reasoning: "Done.", content: `Done: all.txt holds ${EXPECTED}.` },
    ...(s.sideThreads ?? []),
  ];
}

const SUMMARY =
  "<state_snapshot>The user asked to build all.txt from parts written with the shell. f1 holds 12 and f2 holds 345, " +
  "both written in the workspace. Next: combine f1 and f2 into all.txt with cat, which then holds 12345.</state_snapshot>";
const COMPACT_FIRST = "Write f1 and f2 as scripted.";
const COMPACT_LAST = "Combine f1 and f2 into all.txt.";

/**
 * Work, a compaction (the harness's command, or its own past a context budget set low), more work: the sim answers
 * the summarization request with a summary, and the turns after it by their prompt (the history is shorter then).
 */
function compactionSession(s: HarnessScripting): ScriptTurn[] {
  const summaryRequest = s.compaction!.summaryRequest;
  return [
    {
      prompt: COMPACT_FIRST,
      reasoning: "First file.",
      content: "Writing f1.",
      tool_calls: [s.shell("printf 12 > f1")],
    },
    { prompt: COMPACT_FIRST, reasoning: "Second file.", tool_calls: [s.shell("printf 345 > f2")] },
    // Output worth compacting: a harness refuses a summary longer than the history it replaces (Qwen Code does).
    { prompt: COMPACT_FIRST, reasoning: "Check the numbers.", tool_calls: [s.shell("seq 1 400")] },
    { prompt: COMPACT_FIRST, reasoning: "Both written.", content: "f1 and f2 are written." },
    { prompt: summaryRequest, reasoning: "Summarize the work so far.", content: SUMMARY },
    { prompt: COMPACT_LAST, reasoning: "Combine them.", tool_calls: [s.shell("cat f1 f2 > all.txt")] },
    { prompt: COMPACT_LAST, reasoning: "Done.", content: `Done: all.txt holds ${EXPECTED}.` },
    ...(s.sideThreads ?? []),
  ];
}

/** A session to run: the sim's script and the prompts (each after the first continues the session). */
export interface SessionPlan {
  script: ScriptTurn[];
  prompts: string[];
  /** Why this harness cannot run the session (listed in the table instead). */
  unsupported?: string;
  /** Launch with the harness's context budget set low, so that it compacts by itself. */
  compact?: boolean;
}

export const PROMPT = "Build all.txt as scripted: write the files, then combine them.";
const one = (script: ScriptTurn[]): SessionPlan => ({ script, prompts: [PROMPT] });

export const SESSIONS: Record<string, (s: HarnessScripting) => SessionPlan> = {
  main: (s) => one(mainSession(s)),
  "sub-agent": (s) =>
    s.subAgent
      ? one(subAgentSession(s))
      : { script: [], prompts: [], unsupported: s.noSubAgent ?? "no sub-agent tool" },
  long: (s) => one(longSession(s)),
  irregular: (s) => one(irregularSession(s)),
  compaction: (s) =>
    s.compaction
      ? {
          script: compactionSession(s),
          prompts: [COMPACT_FIRST, ...(s.compaction.command ? [s.compaction.command] : []), COMPACT_LAST],
          compact: s.compaction.command === undefined,
        }
      : { script: [], prompts: [], unsupported: s.noCompaction ?? "no compaction" },
  continued: (s) => ({
    script: continuedSession(s),
    prompts: ["Write f1 as scripted.", "Now write f2.", "Combine them into all.txt."],
  }),
};
