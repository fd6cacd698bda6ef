import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { renderChat } from "../tokenizer/chat-template.ts";
import { viewFromChat, viewFromPromptText } from "./conversation.ts";
import { argumentsFor, decideTurn, MAX_DEFAULT_TOOL_CALLS, SIM_COMMAND } from "./policy.ts";
import { READ_TOOL, SHELL_TOOL } from "./test-helpers.ts";

const tool = (name: string, parameters: unknown = {}) => ({ type: "function", function: { name, parameters } });
const USER = [{ role: "user", content: "do it" }];

describe("default policy", () => {
  test("calls the shell-like tool, else the first tool", () => {
    for (const [tools, expected] of [
      [[READ_TOOL, tool("run_shell_command")], "run_shell_command"],
      [[tool("Bash"), READ_TOOL], "Bash"],
      [[READ_TOOL, tool("exec_command")], "exec_command"],
      [[READ_TOOL, tool("web_search")], "read_file"],
    ] as const) {
      const turn = decideTurn(viewFromChat(USER, tools, undefined, undefined), { seed: 0, choice: 0 });
      assert.equal(turn.toolCalls[0]?.name, expected);
      assert.match(turn.reasoning!, new RegExp(expected));
    }
  });

  test("fills arguments from the schema: command strings, argv arrays, required typed values", () => {
    assert.deepEqual(argumentsFor(SHELL_TOOL.function.parameters), { command: SIM_COMMAND });
    assert.deepEqual(
      argumentsFor({
        type: "object",
        properties: { command: { type: "array", items: { type: "string" } }, workdir: { type: "string" } },
      }),
      { command: ["bash", "-lc", SIM_COMMAND] },
    );
    assert.deepEqual(argumentsFor(READ_TOOL.function.parameters), { path: "rlgate-sim", limit: 10, mode: "text" });
    assert.deepEqual(
      argumentsFor({
        type: "object",
        properties: {
          cmd: { type: "string" },
          opts: { type: "object", properties: { force: { type: "boolean" } }, required: ["force"] },
          n: { type: ["null", "number"] },
        },
        required: ["opts", "n"],
      }),
      { cmd: SIM_COMMAND, opts: { force: false }, n: 1 },
    );
  });

  test("tool_choice none answers in text; a named tool_choice picks that tool", () => {
    const tools = [SHELL_TOOL, READ_TOOL];
    assert.equal(decideTurn(viewFromChat(USER, tools, "none", undefined), { seed: 0, choice: 0 }).toolCalls.length, 0);
    const named = decideTurn(
      viewFromChat(USER, tools, { type: "function", function: { name: "read_file" } }, undefined),
      { seed: 0, choice: 0 },
    );
    assert.equal(named.toolCalls[0]?.name, "read_file");
  });

  test("a tool result after the last user message leads to an answer; a new user message to a new call", () => {
    const history = [
      ...USER,
      { role: "assistant", content: null },
      { role: "tool", content: "\n  first line  \nsecond" },
    ];
    const answer = decideTurn(viewFromChat(history, [SHELL_TOOL], undefined, undefined), { seed: 0, choice: 0 });
    assert.equal(answer.toolCalls.length, 0);
    assert.match(answer.content, /"first line"/);
    const again = decideTurn(
      viewFromChat([...history, { role: "user", content: "again" }], [SHELL_TOOL], undefined, undefined),
      { seed: 0, choice: 0 },
    );
    assert.equal(again.toolCalls.length, 1);
  });

  test("a user message after every tool result (OpenClaw's internal context): calls end after MAX_DEFAULT_TOOL_CALLS", () => {
    const context = { role: "user", content: "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> Active exec sessions: none" };
    const history: Array<{ role: string; content: string | null }> = [...USER];
    const tools = [tool("read"), tool("write"), tool("exec"), tool("apply_patch")];
    let calls = 0;
    for (;;) {
      const turn = decideTurn(viewFromChat([...history, context], tools, undefined, undefined), { seed: 0, choice: 0 });
      if (turn.toolCalls.length === 0) {
        assert.match(turn.content, /"output 3"/);
        break;
      }
      assert.equal(turn.toolCalls[0]?.name, "exec");
      history.push({ role: "assistant", content: null }, { role: "tool", content: `output ${calls++}` });
      assert.ok(calls <= MAX_DEFAULT_TOOL_CALLS, "the session ends");
    }
    assert.equal(calls, MAX_DEFAULT_TOOL_CALLS);
  });

  test("wording depends on seed and choice; thinking off drops the reasoning", () => {
    const view = viewFromChat(USER, [], undefined, undefined);
    const words = new Set([0, 1, 2, 3, 4, 5].map((choice) => decideTurn(view, { seed: 0, choice }).content));
    assert.equal(words.size, 6);
    const bySeed = new Set([0, 1, 2, 3, 4, 5, 6, 7].map((seed) => decideTurn(view, { seed, choice: 0 }).content));
    assert.ok(bySeed.size > 1);
    assert.equal(decideTurn(viewFromChat(USER, [], undefined, false), { seed: 0, choice: 0 }).reasoning, null);
  });
});

describe("reading a rendered chat back (completions prompts)", () => {
  test("counts assistant turns, finds tools, tool results and the thinking switch", () => {
    const messages = [
      { role: "system", content: "sys" },
      { role: "user", content: "first" },
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: "a", type: "function", function: { name: "bash", arguments: { command: "ls" } } }],
      },
      { role: "tool", content: "out1" },
      { role: "tool", content: "out2" },
    ];
    const prompt = renderChat(messages, { tools: [SHELL_TOOL] });
    const view = viewFromPromptText(prompt);
    assert.equal(view.chatShaped, true);
    assert.equal(view.assistantTurns, 1);
    assert.deepEqual(
      view.tools.map((t) => t.name),
      ["bash"],
    );
    assert.deepEqual(view.toolResults, ["out1", "out2"]);
    assert.equal(view.lastUserText, "first");
    assert.equal(view.openingUserText, "first");
    assert.equal(view.thinking, true);
    assert.deepEqual(viewFromChat(messages, [SHELL_TOOL], undefined, undefined).toolResults, view.toolResults);
    assert.equal(viewFromPromptText(renderChat(messages.slice(0, 2), { enableThinking: false })).thinking, false);
    assert.equal(viewFromPromptText("just some text").chatShaped, false);
  });
});

describe("scripted threads", () => {
  const script = [
    { content: "main 0", tool_calls: [{ name: "Agent", arguments: { prompt: "SUBTASK write b" } }] },
    { thread: "SUBTASK", content: "sub 0", tool_calls: [{ name: "Bash", arguments: { command: "echo b" } }] },
    { thread: "SUBTASK", content: "sub done" },
    { content: "main done" },
  ];
  const play = (messages: { role: string; content: string }[]) =>
    decideTurn(viewFromChat(messages, [], undefined, undefined), { seed: 0, choice: 0, script }).content;

  test("a conversation whose opening user messages hold a thread's text plays that thread's turns, counted on their own", () => {
    assert.equal(play([{ role: "user", content: "go" }]), "main 0");
    assert.equal(
      play([
        { role: "user", content: "go" },
        { role: "assistant", content: "main 0" },
        { role: "user", content: "r" },
      ]),
      "main done",
    );
    assert.equal(play([{ role: "user", content: "<ctx/> SUBTASK write b" }]), "sub 0");
    // Codex opens with an environment-context user message, then the sub-agent's prompt.
    assert.equal(
      play([
        { role: "user", content: "<environment_context/>" },
        { role: "user", content: "SUBTASK write b" },
      ]),
      "sub 0",
    );
    assert.equal(
      play([
        { role: "user", content: "SUBTASK write b" },
        { role: "assistant", content: "sub 0" },
        { role: "user", content: "b" },
      ]),
      "sub done",
    );
  });

  test("a harness's own reply before the task (Qwen Code's canned answer to its startup context) still opens the thread", () => {
    const opening = [
      { role: "user", content: "<startup context/>" },
      { role: "assistant", content: "Got it." },
    ];
    assert.equal(play([...opening, { role: "user", content: "SUBTASK write b" }]), "sub done");
    // What comes after a tool result does not open a thread: a sub-agent's answer quoting its task stays main's.
    assert.equal(
      play([
        { role: "user", content: "go" },
        { role: "assistant", content: "main 0" },
        { role: "tool", content: "done" },
        { role: "user", content: "SUBTASK wrote b" },
      ]),
      "main done",
    );
  });
});

describe("scripted prompts", () => {
  const script = [
    { content: "main 0" },
    { prompt: "second task", content: "second 0", tool_calls: [{ name: "Bash", arguments: { command: "echo b" } }] },
    { prompt: "second task", content: "second done" },
    { prompt: "<summary>", content: "the summary" },
  ];
  const play = (messages: { role: string; content: string; tool_call_id?: string }[]) =>
    decideTurn(viewFromChat(messages as never, [], undefined, undefined), { seed: 0, choice: 0, script }).content;

  test("a turn keyed by its prompt plays after as many tool results as turns before it, whatever the history holds", () => {
    assert.equal(play([{ role: "user", content: "go" }]), "main 0");
    const history = [
      { role: "user", content: "go" },
      { role: "assistant", content: "main 0" },
      { role: "user", content: "the second task" },
    ];
    assert.equal(play(history), "second 0");
    assert.equal(
      play([...history, { role: "assistant", content: "second 0" }, { role: "tool", tool_call_id: "c", content: "b" }]),
      "second done",
    );
    // A summarization request after a long history, and the compacted history that follows it.
    assert.equal(
      play([...history, { role: "assistant", content: "x" }, { role: "user", content: "<summary>" }]),
      "the summary",
    );
    assert.equal(
      play([
        { role: "user", content: "the summary" },
        { role: "user", content: "the second task" },
      ]),
      "second 0",
    );
  });

  test("a conversation that opens a named thread plays it even when it quotes a prompt (OpenCode's title request)", () => {
    const titled = [...script, { thread: "Generate a title", content: "A title" }];
    const view = viewFromChat(
      [{ role: "user", content: "Generate a title for this conversation: the second task" }] as never,
      [],
      undefined,
      undefined,
    );
    assert.equal(decideTurn(view, { seed: 0, choice: 0, script: titled }).content, "A title");
  });

  test("a summarizer's request that quotes the conversation's prompt before its own instruction gets the summary (OpenCode's)", () => {
    assert.equal(
      play([{ role: "user", content: "<conversation>[User]: the second task</conversation>\nWrite the <summary>." }]),
      "the summary",
    );
  });
});
