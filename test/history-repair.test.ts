// History repair through the gateway and the simulated vLLM (real Qwen3 template and tokenizer): a Qwen-Code-like
// harness session of 8 turns and 7 tool-calling turns (text before a tool call, parallel tool calls, a turn whose
// reasoning the harness drops, a turn with thinking off) echoes vLLM's parsed fields back as they are. With repair,
// each prompt extends the previous prompt + sampled ids exactly and the rollout is one trajectory without a break;
// with --no-repair-history the breaks come back.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { ScriptTurn } from "../sim/index.ts";
import type { CallRecord } from "../store/records.ts";
import { createRollout, postJson, rolloutCalls, startStack, type Stack } from "./helpers.ts";

const TOOLS = ["read_file", "run_shell_command", "write_file"].map((name) => ({
  type: "function",
  function: {
    name,
    description: `The ${name} tool.`,
    parameters: { type: "object", properties: { arg: { type: "string" } }, required: ["arg"] },
  },
}));

const call = (name: string, arg: string) => ({ name, arguments: { arg } });
const SCRIPT: ScriptTurn[] = [
  { reasoning: "Read the module first.", tool_calls: [call("read_file", "src/a.py")] },
  {
    reasoning: "It sums from 1.",
    content: "The loop starts at 1, not 0.",
    tool_calls: [call("read_file", "tests/test_a.py")],
  },
  {
    reasoning: "Check both files at once.",
    tool_calls: [call("read_file", "src/b.py"), call("read_file", "src/c.py")],
  },
  { reasoning: "Fix it.", tool_calls: [call("write_file", "src/a.py")] },
  {
    reasoning: "Run the tests.",
    content: "Running the tests now.",
    tool_calls: [call("run_shell_command", "pytest -q")],
  },
  { reasoning: "One failure left.", tool_calls: [call("write_file", "tests/test_a.py")] },
  { reasoning: "Run them again.", tool_calls: [call("run_shell_command", "pytest -q")] },
  { reasoning: "All green.", content: "Fixed the off-by-one in src/a.py; the tests pass." },
];
/** The turn whose reasoning the harness does not send back, and the one it asks for with thinking off. */
const DROPS_REASONING = 3;
const THINKING_OFF = 5;

/** Plays the session like a harness that sends vLLM's parsed message back verbatim. */
async function runSession(stack: Stack): Promise<{ id: string; calls: CallRecord[] }> {
  const rollout = await createRollout(stack.gateway.url, { group: "repair", harness: "qwen-code-like" });
  const messages: Array<Record<string, unknown>> = [
    { role: "system", content: "You are a coding agent. Use the tools." },
    { role: "user", content: "Fix the off-by-one in src/a.py and make the tests pass." },
  ];
  for (let turn = 0; turn < SCRIPT.length; turn++) {
    const body: Record<string, unknown> = { model: "Qwen/Qwen3-8B", messages, tools: TOOLS };
    if (turn === THINKING_OFF) body["chat_template_kwargs"] = { enable_thinking: false };
    const res = await postJson(`${rollout.base_urls.openai}/chat/completions`, body);
    assert.equal(res.status, 200, res.text);
    const message = { ...res.json.choices[0].message } as Record<string, unknown>;
    for (const key of Object.keys(message))
      if (message[key] === null || (Array.isArray(message[key]) && !(message[key] as unknown[]).length))
        delete message[key];
    if (turn === DROPS_REASONING) delete message["reasoning"];
    messages.push(message);
    for (const [i, toolCall] of ((message["tool_calls"] as Array<{ id: string }>) ?? []).entries()) {
      messages.push({ role: "tool", tool_call_id: toolCall.id, content: `output ${turn}.${i}` });
    }
  }
  await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
  return { id: rollout.id, calls: await rolloutCalls(stack.gateway.url, rollout.id) };
}

/** The same kind of session on the Messages API, like Claude Code: text, thinking and tool_use blocks echoed back. */
async function runMessagesSession(stack: Stack, turns: number): Promise<{ id: string; calls: CallRecord[] }> {
  const rollout = await createRollout(stack.gateway.url, { group: "repair", harness: "claude-code-like" });
  const tools = TOOLS.map((t) => ({
    name: t.function.name,
    description: t.function.description,
    input_schema: t.function.parameters,
  }));
  const messages: Array<Record<string, unknown>> = [
    { role: "user", content: "Fix the off-by-one in src/a.py and make the tests pass." },
  ];
  for (let turn = 0; turn < turns; turn++) {
    const body = { model: "Qwen/Qwen3-8B", max_tokens: 1024, system: "You are a coding agent.", messages, tools };
    const res = await postJson(`${rollout.base_urls.anthropic}/v1/messages`, body);
    assert.equal(res.status, 200, res.text);
    const content = res.json.content as Array<Record<string, unknown>>;
    messages.push({ role: "assistant", content });
    const uses = content.filter((b) => b["type"] === "tool_use");
    if (uses.length)
      messages.push({
        role: "user",
        content: uses.map((u, i) => ({ type: "tool_result", tool_use_id: u["id"], content: `output ${turn}.${i}` })),
      });
  }
  await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
  return { id: rollout.id, calls: await rolloutCalls(stack.gateway.url, rollout.id) };
}

async function trajectories(stack: Stack, id: string): Promise<any> {
  const res = await fetch(`${stack.gateway.url}/api/rollouts/${id}/trajectories`);
  assert.equal(res.status, 200);
  return res.json();
}

describe("history repair (messages mode, simulated vLLM)", () => {
  let repaired: Stack;
  let plain: Stack;
  before(async () => {
    repaired = await startStack({ sim: { script: SCRIPT } });
    plain = await startStack({ sim: { script: SCRIPT }, gateway: { repairHistory: false } });
  });
  after(async () => {
    await repaired?.close();
    await plain?.close();
  });

  test("a Qwen-Code-like session is one trajectory with 0 breaks; every prompt extends the previous prompt + sampled ids", async () => {
    const { id, calls } = await runSession(repaired);
    assert.equal(calls.length, SCRIPT.length);
    for (let i = 1; i < calls.length; i++) {
      const prev = [...calls[i - 1]!.promptTokenIds!, ...calls[i - 1]!.choices[0]!.tokenIds];
      assert.deepEqual(calls[i]!.promptTokenIds!.slice(0, prev.length), prev, `call ${i + 1} extends call ${i}`);
    }
    // What was repaired, turn by turn: vLLM's "\n\n" before a tool call, the text's trailing "\n", the dropped
    // reasoning, the thinking-off turn's empty think block.
    const kinds = new Set(calls.flatMap((c) => (c.repairs ?? []).map((r) => r.kind)));
    assert.deepEqual([...kinds].sort(), ["content", "empty_think", "reasoning"]);
    const last = calls[calls.length - 1]!;
    const byTurn = new Map((last.repairs ?? []).map((r) => [r.turn, r]));
    const forwarded = (last.requestForwarded as { messages: Array<Record<string, unknown>> }).messages;
    const received = (last.requestReceived as { messages: Array<Record<string, unknown>> }).messages;
    for (const turn of byTurn.keys()) assert.equal(forwarded[turn]!["role"], "assistant");
    // The harness's own request is recorded as it sent it.
    assert.equal(received[2]!["content"], "\n\n");
    assert.equal(forwarded[2]!["content"], "");
    assert.deepEqual(byTurn.get(2), { turn: 2, kind: "content", callSeq: calls[0]!.seq });
    assert.equal(last.tools, TOOLS.length);

    const rec = await trajectories(repaired, id);
    assert.equal(rec.trajectories.length, 1);
    assert.equal(rec.trajectories[0].segment, "main");
    assert.deepEqual(rec.breaks, []);
    assert.equal(rec.stats.amplification, 1);
    assert.equal(rec.stats.trained_tokens, rec.stats.sampled_tokens);
  });

  test("Messages API (Claude-Code-like): the text block's trailing newline before a tool call is put back; 0 breaks", async () => {
    const { id, calls } = await runMessagesSession(repaired, 6);
    const text = (calls[1]!.response as any).content.find((b: any) => b.type === "text");
    // The harness sees the text without vLLM's leading newlines (they print as blank lines) and with its trailing one.
    assert.equal(text.text, "The loop starts at 1, not 0.\n", "the harness got vLLM's text with its trailing newline");
    assert.ok(calls.some((c) => (c.repairs ?? []).some((r) => r.kind === "content")));
    const rec = await trajectories(repaired, id);
    assert.deepEqual(rec.breaks, []);
    assert.equal(rec.trajectories.length, 1);
    const without = await runMessagesSession(plain, 6);
    const broken = await trajectories(plain, without.id);
    assert.ok(broken.stats.breaks.reserialization >= 2, JSON.stringify(broken.stats.breaks));
  });

  test("the harness sees the same answers with and without repair", async () => {
    const a = await runSession(repaired);
    const b = await runSession(plain);
    const answer = (c: CallRecord) => {
      const m = (c.response as any).choices[0].message;
      return [m.content, m.reasoning, (m.tool_calls ?? []).map((t: any) => [t.function.name, t.function.arguments])];
    };
    assert.deepEqual(a.calls.map(answer), b.calls.map(answer));
  });

  test("--no-repair-history forwards the history as sent: the re-serialization breaks come back", async () => {
    const { id, calls } = await runSession(plain);
    assert.ok(calls.every((c) => c.repairs === undefined));
    assert.ok(calls.every((c) => JSON.stringify(c.requestForwarded).includes('"messages"')));
    const rec = await trajectories(plain, id);
    assert.ok(rec.trajectories.length > 1, `${rec.trajectories.length} trajectories`);
    assert.equal(rec.stats.breaks.reserialization, calls.length - 1);
    assert.equal(rec.stats.breaks.branch, 0, "the thinking-off turn's break is a re-serialization, not a branch");
    assert.ok(rec.stats.amplification > 3, `amplification ${rec.stats.amplification}`);
    assert.equal(rec.stats.trained_tokens, rec.stats.sampled_tokens);
  });
});
