// The `ephemeral_context` cause on Qwen3 prompts rendered by the real template: a harness that ends each request with
// a context message and moves it behind the answer in the next (OpenClaw), against the same history with the message
// rewritten in place (context_changed) and with a user message that stays (an extension). The prefix tree and the
// naive reference agree, and `rlgate show` says the pattern is expected.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ChatMessage } from "../tokenizer/chat-template.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { formatReconstruction } from "./format.ts";
import { naiveReconstruct } from "./naive.ts";
import { reconstructRollout } from "./reconstruct.ts";
import { assistantMessage, CallLog, tool, toolMessage, type Turn } from "./testing/qwen3-session.ts";

const TOOLS = [tool("exec", { command: "string" })];

function turn(t: number): Turn {
  return {
    reasoning: `Run step ${t}.`,
    content: "",
    toolCalls: [{ name: "exec", arguments: { command: `echo ${t}` } }],
  };
}

/** `context(t)`: the message that ends call t's request, or null for none. */
function session(calls: number, context: (t: number, history: ChatMessage[]) => ChatMessage[]) {
  const log = new CallLog();
  const history: ChatMessage[] = [
    { role: "system", content: "You are a personal assistant." },
    { role: "user", content: "create out.txt" },
  ];
  for (let t = 0; t < calls; t++) {
    log.chat(context(t, history), [turn(t)], { tools: TOOLS });
    history.push(assistantMessage(turn(t), { keepReasoning: false }), toolMessage(`ran ${t}`));
  }
  return log.calls;
}

const ctx = (t: number): ChatMessage => ({
  role: "user",
  content: `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nactive exec sessions: ${t}\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>`,
});

function causes(calls: ReturnType<typeof session>): string[] {
  const tree = reconstructRollout(calls, { rolloutId: "r" });
  const naive = naiveReconstruct(calls, { rolloutId: "r" });
  assert.deepEqual(naive.breaks, tree.breaks, "the naive reference names the same breaks");
  assert.deepEqual(naive.stats, tree.stats);
  return tree.breaks.map((b) => `${b.kind}/${b.cause ?? ""}`);
}

describe("ephemeral_context", () => {
  it("a trailing context message moved behind the answer on every call", () => {
    const calls = session(6, (t, history) => [...history, ctx(t)]);
    assert.deepEqual(causes(calls), Array(5).fill("branch/ephemeral_context"));
    const rec = reconstructRollout(calls, { rolloutId: "r", maxLeaves: 2 });
    assert.deepEqual(
      rec.segments.map((s) => [s.kind, s.callSeqs.length]),
      [["main", 6]],
    );
    assert.equal(rec.stats.retainedTrajectories, 6);
    assert.equal(rec.stats.trainedTokens, rec.stats.sampledTokens);
    assert.equal(rec.flags.flagged, false, rec.flags.reasons.join("; "));
    assert.equal(rec.flags.ephemeralContextLeaves, 5);
    const tok = qwen3Tokenizer();
    const text = formatReconstruction(rec, { detokenize: (ids) => tok.decode(ids) });
    assert.match(text, /breaks: branch 5/);
    assert.match(text, /ephemeral context \(expected\): 5 calls ended with a context message the next call moved/);
    assert.match(text, /branch @\d+ from #\d+\.0 .* — ephemeral_context: the harness dropped the context message/);
  });

  it("counts only the other leaves against the limit", () => {
    // The last call's leaf is the one no move explains.
    const calls = session(4, (t, history) => [...history, ctx(t)]);
    const rec = reconstructRollout(calls, { rolloutId: "r", maxLeaves: 0 });
    assert.equal(rec.flags.tooManyLeaves, true);
    assert.deepEqual(rec.flags.reasons, ["1 leaves > 0 (besides 3 left by ephemeral_context breaks)"]);
  });

  it("a context message rewritten in place, or one that stays, is no move", () => {
    const rewritten = session(4, (t, history) => {
      // The message sits before the history's latest turns, and changes.
      const at = Math.max(2, history.length - 2);
      return [...history.slice(0, at), ctx(t), ...history.slice(at)];
    });
    assert.ok(!causes(rewritten).includes("branch/ephemeral_context"), causes(rewritten).join());
    const kept: ChatMessage[] = [];
    const stays = session(4, (t, history) => {
      if (t === 0) kept.push(ctx(0));
      return [...history.slice(0, 2), ...kept, ...history.slice(2)];
    });
    // Qwen3's template drops the reasoning of turns before the last user message, which the kept one is.
    assert.deepEqual(causes(stays), Array(3).fill("reserialization/reasoning_dropped"));
  });
});
