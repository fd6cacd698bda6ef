// A harness that moves a trailing context message (OpenClaw: every request ends with an internal-context user message
// that the next request leaves out, appending the answer, the tool result and that message again), through the gateway
// against the sim, in both prompt modes and in every built-in chat family where the mode keeps a thread's prefix: each
// call is a trajectory of its own whose break says `ephemeral_context`, all in the main segment, every sampled token
// trained once, not flagged for its many leaves; in tokens mode each prompt is the previous prompt without that
// message, then the sampled ids, then the new messages.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { startGateway } from "../gateway/index.ts";
import type { ScriptTurn, SimOptions } from "../sim/index.ts";
import type { CallRecord } from "../store/records.ts";
import { GPTOSS_VOCAB_SIZE } from "../tokenizer/gptoss.ts";
import {
  deepSeekV31ChatFormat,
  gptossChatFormat,
  llama3ChatFormat,
  qwen3ChatFormat,
  qwen3CoderChatFormat,
  type ModelChatFormat,
} from "../tokenizer/model-format.ts";
import { chatFormatOf } from "../trajectory/chat-format.ts";
import { fromCallRecord, reconstructRollout } from "../trajectory/index.ts";
import { chat, SHELL_TOOLS } from "./family-chat.ts";
import { createRollout, postJson, rolloutCalls, startStack, type Stack } from "./helpers.ts";

type Json = Record<string, any>;

interface Family {
  name: string;
  parser: NonNullable<SimOptions["toolCallParser"]>;
  format: () => ModelChatFormat;
  reasoning: boolean;
  /** Whether messages mode keeps a thread's prefix in this family (gpt-oss and DeepSeek V3.1 re-render every turn). */
  messages: boolean;
  vocabSize?: number;
}

const FAMILIES: Family[] = [
  { name: "Qwen3", parser: "hermes", format: qwen3ChatFormat, reasoning: true, messages: true },
  { name: "Qwen3-Coder", parser: "qwen3_coder", format: qwen3CoderChatFormat, reasoning: false, messages: true },
  { name: "Llama 3.x", parser: "llama3_json", format: llama3ChatFormat, reasoning: false, messages: true },
  { name: "DeepSeek V3.1", parser: "deepseek_v31", format: deepSeekV31ChatFormat, reasoning: false, messages: false },
  {
    name: "gpt-oss",
    parser: "openai",
    format: gptossChatFormat,
    reasoning: true,
    messages: false,
    vocabSize: GPTOSS_VOCAB_SIZE,
  },
];

function script(turns: number, reasoning: boolean): ScriptTurn[] {
  return Array.from({ length: turns }, (_, t): ScriptTurn => {
    const turn: ScriptTurn = reasoning ? { reasoning: `Step ${t}: look at the folder.` } : {};
    if (t === turns - 1) return { ...turn, content: "Done." };
    return { ...turn, tool_calls: [{ name: "run_shell_command", arguments: { command: `ls dir${t}` } }] };
  });
}

/** OpenClaw's internal context, rewritten on every call (what it lists changes as the session goes). */
function context(t: number): Json {
  return {
    role: "user",
    content: `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nactive exec sessions: ${t}\nsubagents: none\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>`,
  };
}

/**
 * Plays a session as OpenClaw does: each request is the history plus the context message; the next request's history
 * holds the answer and tool results, not that message. `contextFrom`: the first call that carries one.
 */
async function session(
  stack: Stack,
  turns: number,
  contextFrom = 0,
): Promise<{ rolloutId: string; calls: CallRecord[] }> {
  const rollout = await createRollout(stack.gateway.url);
  const history: Json[] = [
    { role: "system", content: "You are a personal assistant." },
    { role: "user", content: "create a file named out.txt containing hi" },
  ];
  for (let t = 0; t < turns; t++) {
    const messages = t >= contextFrom ? [...history, context(t)] : history;
    const answer = await chat(rollout.base_urls.openai, {
      model: "Qwen/Qwen3-8B",
      messages,
      tools: SHELL_TOOLS,
      stream: t % 2 === 1,
    });
    // OpenClaw sends back the answer's text and calls, not its reasoning.
    history.push({ role: "assistant", content: answer.content ?? "", tool_calls: answer.tool_calls });
    for (const call of answer.tool_calls ?? [])
      history.push({ role: "tool", tool_call_id: call.id, content: `ran ${call.function.arguments}` });
  }
  return { rolloutId: rollout.id, calls: await rolloutCalls(stack.gateway.url, rollout.id) };
}

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  return prefix.length <= ids.length && prefix.every((id, i) => ids[i] === id);
}

/** Tokens mode: each call continues the one before it without its trailing context message. */
function assertMovedThread(calls: readonly CallRecord[], contextFrom: number): void {
  calls.forEach((call, i) => {
    assert.equal(call.prompt?.mode, "tokens", `call ${i}`);
    if (i === 0) return;
    const previous = calls[i - 1]!;
    assert.deepEqual(call.prompt?.parent, { seq: previous.seq, choice: 0 }, `call ${i}`);
    const sampled = previous.choices[0]!.tokenIds!;
    const earlier = previous.promptTokenIds!;
    if (i <= contextFrom) {
      assert.equal(call.prompt?.movedContext, undefined);
      assert.ok(startsWith(call.promptTokenIds!, [...earlier, ...sampled]), `call ${i}`);
      return;
    }
    assert.equal(call.prompt?.movedContext, true, `call ${i}`);
    const { start, end } = previous.prompt!.trailingContext!;
    const kept = [...earlier.slice(0, start), ...earlier.slice(end), ...sampled];
    assert.ok(startsWith(call.promptTokenIds!, kept), `call ${i}: the previous prompt without its context message`);
  });
}

async function finish(stack: Stack, rolloutId: string): Promise<Json> {
  const res = await postJson(`${stack.gateway.url}/api/rollouts/${rolloutId}/finish`, { reward: 1 });
  assert.equal(res.status, 200, res.text);
  return (await (await fetch(`${stack.gateway.url}/api/rollouts/${rolloutId}/trajectories`)).json()) as Json;
}

function assertEphemeral(rec: Json, calls: number, moved: number): void {
  const summary = JSON.stringify({ stats: rec.stats, breaks: rec.breaks, flags: rec.flags });
  assert.deepEqual(
    rec.segments.map((s: Json) => [s.kind, s.call_seqs.length]),
    [["main", calls]],
    summary,
  );
  assert.deepEqual(
    rec.breaks.map((b: Json) => `${b.kind}/${b.cause}`),
    Array(moved).fill("branch/ephemeral_context"),
    summary,
  );
  assert.equal(rec.stats.retained_trajectories, moved + 1, summary);
  assert.equal(rec.stats.trained_tokens, rec.stats.sampled_tokens, summary);
  assert.ok(rec.stats.sampled_tokens > 0);
  assert.equal(rec.flags.flagged, false, summary);
  assert.equal(rec.flags.ephemeral_context_leaves, moved, summary);
}

describe("a trailing context message the harness moves (OpenClaw)", () => {
  for (const family of FAMILIES) {
    for (const prompts of ["tokens", "messages"] as const) {
      if (prompts === "messages" && !family.messages) continue;
      test(`${family.name}, ${prompts} mode: one trajectory per call, main, ephemeral_context breaks, trained once`, async () => {
        const turns = 5;
        const stack = await startStack({
          sim: { script: script(turns, family.reasoning), toolCallParser: family.parser },
          gateway: {
            prompts,
            model: family.format(),
            ...(family.vocabSize ? { vocabSize: family.vocabSize } : {}),
          },
        });
        try {
          const { rolloutId, calls } = await session(stack, turns);
          assert.equal(calls.length, turns);
          for (const call of calls) assert.equal(call.status, "ok");
          if (prompts === "tokens") assertMovedThread(calls, 0);
          assertEphemeral(await finish(stack, rolloutId), turns, turns - 1);
          // Many such calls are not too many leaves: the limit counts the others.
          const rec = reconstructRollout(calls.map(fromCallRecord), {
            rolloutId,
            maxLeaves: 1,
            chatFormat: chatFormatOf(family.format()),
          });
          assert.equal(rec.flags.tooManyLeaves, false);
          assert.equal(rec.flags.ephemeralContextLeaves, turns - 1);
        } finally {
          await stack.close();
        }
      });
    }
  }

  for (const prompts of ["tokens", "messages"] as const) {
    test(`Qwen3, ${prompts} mode: a context message that appears only from the third call on`, async () => {
      const turns = 5;
      const stack = await startStack({ sim: { script: script(turns, true) }, gateway: { prompts } });
      try {
        const { rolloutId, calls } = await session(stack, turns, 2);
        if (prompts === "tokens") {
          assertMovedThread(calls, 2);
          assertEphemeral(await finish(stack, rolloutId), turns, turns - 3);
          return;
        }
        // Messages mode: Qwen3's template drops the reasoning of turns before the last user message, which the
        // context message now is: that break is the template's, the moves are the harness's.
        const rec = await finish(stack, rolloutId);
        assert.deepEqual(
          rec.breaks.map((b: Json) => `${b.kind}/${b.cause}`),
          ["reserialization/reasoning_dropped", ...Array(turns - 3).fill("branch/ephemeral_context")],
          JSON.stringify(rec.breaks),
        );
        assert.deepEqual(
          rec.segments.map((s: Json) => s.kind),
          ["main"],
        );
        assert.equal(rec.stats.trained_tokens, rec.stats.sampled_tokens);
      } finally {
        await stack.close();
      }
    });
  }

  test("tokens mode: a thread past a moved context message continues after the gateway restarts on the same store", async () => {
    const turns = 4;
    const stack = await startStack({ sim: { script: script(turns, true) }, gateway: { prompts: "tokens" } });
    try {
      const rollout = await createRollout(stack.gateway.url);
      const history: Json[] = [{ role: "user", content: "create a file" }];
      for (let t = 0; t < turns; t++) {
        if (t === 2) {
          const port = stack.gateway.port;
          await stack.gateway.close();
          stack.gateway = await startGateway({
            upstream: stack.sim.url,
            port,
            dataDir: stack.dataDir,
            prompts: "tokens",
          });
        }
        const answer = await chat(rollout.base_urls.openai, {
          model: "Qwen/Qwen3-8B",
          messages: [...history, context(t)],
          tools: SHELL_TOOLS,
        });
        history.push({ role: "assistant", content: answer.content ?? "", tool_calls: answer.tool_calls });
        for (const call of answer.tool_calls ?? [])
          history.push({ role: "tool", tool_call_id: call.id, content: "ok" });
      }
      const calls = await rolloutCalls(stack.gateway.url, rollout.id);
      assertMovedThread(calls, 0);
      assertEphemeral(await finish(stack, rollout.id), turns, turns - 1);
    } finally {
      await stack.close();
    }
  });
});
