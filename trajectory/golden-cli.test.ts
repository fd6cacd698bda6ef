// Golden tests from real harness CLI sessions (issue 28): the request bodies each CLI sent through the gateway to the
// simulated vLLM (`npm run harness-matrix -- --sessions … --save-calls DIR`), with the prompt ids the model saw and the
// ids it sampled, reconstructed as a trainer gets them. One per case of the issue: a compaction's summarizer (Qwen
// Code, Claude Code, Codex, OpenCode), Codex's sub-agent notification, a continued session whose harness rewrote its
// own context, a 24-call session in tokens mode.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { reconstructRollout } from "./reconstruct.ts";
import { fixtureCalls, loadCliFixture, unpackBody, type CliFixture } from "./testing/cli-fixtures.ts";
import type { Reconstruction, SegmentKind } from "./types.ts";

function reconstruct(fixture: CliFixture): Reconstruction {
  return reconstructRollout(fixtureCalls(fixture), { rolloutId: fixture.session });
}

function countBy<T>(items: readonly T[], key: (item: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const item of items) out[key(item)] = (out[key(item)] ?? 0) + 1;
  return out;
}

/** Messages of a call's body as the CLI sent it (chat) or as it went upstream (Messages, Responses). */
function chatMessages(fixture: CliFixture, index: number): Array<Record<string, unknown>> {
  const call = fixture.calls[index]!;
  const received = unpackBody(fixture, call.received);
  const body = Array.isArray(received["messages"]) ? received : unpackBody(fixture, call.forwarded);
  return body["messages"] as Array<Record<string, unknown>>;
}

/** Each sampled token (a call's choice, at its depth) is trained in one trajectory at most. */
function assertTrainedOnce(rec: Reconstruction): void {
  const seen = new Set<string>();
  for (const t of rec.trajectories.filter((t) => t.trained)) {
    for (const span of t.spans.filter((s) => s.kind === "trained")) {
      for (let i = span.start; i < span.end; i++) {
        const key = `${span.callSeq}:${span.choiceIndex}:${i}`;
        assert.ok(!seen.has(key), `${key} trained twice`);
        seen.add(key);
      }
    }
  }
}

/** A compaction session as a trainer gets it: one compaction break, main the only trained trajectory, no token twice. */
function assertCompactedOnce(rec: Reconstruction): void {
  assert.deepEqual(
    rec.breaks.map((b) => b.kind),
    ["compaction"],
  );
  assert.deepEqual(
    rec.trajectories.filter((t) => t.trained).map((t) => t.segment),
    ["main"],
  );
  assertTrainedOnce(rec);
}

/** The segment the fixture's i-th call is in. */
function segmentAt(fixture: CliFixture, rec: Reconstruction, i: number): Reconstruction["segments"][number] {
  return rec.segments.find((s) => s.callSeqs.includes(fixture.calls[i]!.seq))!;
}

describe("golden: real harness CLI sessions (issue 28)", () => {
  it("Qwen Code /compress: the summarizer (its own system prompt, no tools, the history in its prompt) is auxiliary, the continuation a compaction thread", () => {
    const fixture = loadCliFixture("qwen-code-compaction-messages");
    const summarizer = fixture.calls.findIndex((c) => c.tools === 0);
    assert.match(String(chatMessages(fixture, summarizer)[0]!["content"]), /summarizes internal chat history/);
    const rec = reconstruct(fixture);
    const segmentOf = (i: number) => segmentAt(fixture, rec, i);
    assert.deepEqual(
      rec.segments.map((s) => s.kind),
      ["main", "auxiliary", "compaction"],
    );
    assert.equal(segmentOf(summarizer).kind, "auxiliary");
    // The history it summarizes holds main's answers in assistant turns: not a summary it starts from (before issue
    // 28 this call was a sub-agent and the continuation a branch of main).
    const compaction = rec.breaks.find((b) => b.kind === "compaction")!;
    assert.equal(compaction.callSeq, fixture.calls[summarizer + 1]!.seq);
    assert.deepEqual(compaction.from, { callSeq: fixture.calls[summarizer]!.seq, choiceIndex: 0 });
    assert.ok(compaction.oldTokens > 0);
    assertCompactedOnce(rec);
  });

  it("Claude Code /compact: the summary request at the end of main's history is auxiliary, main one trajectory, the continuation a compaction", () => {
    const fixture = loadCliFixture("claude-code-compaction-messages");
    const rec = reconstruct(fixture);
    assert.deepEqual(
      rec.segments.map((s) => [s.kind, s.callSeqs.length]),
      [
        ["main", 3],
        ["compaction", 2],
        ["auxiliary", 1],
      ],
    );
    const summarizer = rec.segments[2]!.firstCallSeq;
    const request = chatMessages(
      fixture,
      fixture.calls.findIndex((c) => c.seq === summarizer),
    );
    assert.match(JSON.stringify(request[request.length - 1]), /create a detailed summary of the conversation/);
    assert.deepEqual(
      rec.breaks.map((b) => [b.kind, b.from?.callSeq]),
      [["compaction", summarizer]],
    );
    assert.equal(rec.trajectories.filter((t) => t.segment === "main").length, 1);
    assertTrainedOnce(rec);
  });

  it("Codex auto-compaction (model_auto_compact_token_limit): the CONTEXT CHECKPOINT summarizer is auxiliary, main one trajectory", () => {
    const fixture = loadCliFixture("codex-compaction-messages");
    const rec = reconstruct(fixture);
    assert.deepEqual(
      rec.segments.map((s) => s.kind),
      ["main", "auxiliary", "compaction"],
    );
    const summarizer = fixture.calls.findIndex((c) => c.seq === rec.segments[1]!.firstCallSeq);
    assert.match(JSON.stringify(chatMessages(fixture, summarizer).at(-1)), /CONTEXT CHECKPOINT COMPACTION/);
    assert.deepEqual(rec.breaks.find((b) => b.kind === "compaction")!.from, {
      callSeq: fixture.calls[summarizer]!.seq,
      choiceIndex: 0,
    });
    assert.equal(rec.trajectories.filter((t) => t.segment === "main").length, 1);
    assertTrainedOnce(rec);
  });

  it("OpenCode auto-compaction (a small context limit), tokens mode: the title call and the summarizer auxiliary, the continuation a compaction of main — not a sub-agent because the title call came first", () => {
    const fixture = loadCliFixture("opencode-compaction-tokens");
    const rec = reconstruct(fixture);
    const summarizer = fixture.calls.findIndex((c) => c.tools === 0 && c.seq !== fixture.calls[0]!.seq);
    const request = chatMessages(fixture, summarizer);
    assert.match(String(request[0]!["content"]), /context summarization agent/);
    assert.match(String(request[1]!["content"]), /anchored summary/);
    // OpenCode starts again from [system, "What did we do so far?", the summary as the assistant's answer, …].
    const continuation = chatMessages(fixture, summarizer + 1);
    assert.equal(continuation[2]!["role"], "assistant");
    assert.match(String(continuation[2]!["content"]), /<state_snapshot>/);
    const segmentOf = (i: number) => segmentAt(fixture, rec, i);
    assert.equal(segmentOf(0).kind, "auxiliary");
    assert.equal(segmentOf(summarizer).kind, "auxiliary");
    assert.equal(segmentOf(summarizer + 1).kind, "compaction");
    assert.equal(segmentOf(summarizer + 1).parentId, segmentOf(1).id);
    assertCompactedOnce(rec);
  });

  it("pi auto-compaction (a small contextWindow), chat API, tokens mode: the summarizer is auxiliary, the continuation that holds its summary in a user message a compaction of main", () => {
    const fixture = loadCliFixture("pi-chat-compaction-tokens");
    const rec = reconstruct(fixture);
    assert.deepEqual(
      rec.segments.map((s) => s.kind),
      ["main", "auxiliary", "compaction"],
    );
    const summarizer = fixture.calls.findIndex((c) => c.seq === rec.segments[1]!.firstCallSeq);
    assert.match(String(chatMessages(fixture, summarizer)[0]!["content"]), /context summarization assistant/);
    const continuation = chatMessages(fixture, summarizer + 1);
    assert.match(JSON.stringify(continuation[1]), /compacted into the following summary:[\s\S]*<state_snapshot>/);
    assert.deepEqual(
      rec.breaks.map((b) => [b.kind, b.from?.callSeq]),
      [["compaction", fixture.calls[summarizer]!.seq]],
    );
    assert.equal(rec.trajectories.filter((t) => t.segment === "main").length, 1);
    assertTrainedOnce(rec);
  });

  for (const [name, tool] of [
    ["qwen-code-sub-agent-tokens", "agent"],
    ["opencode-sub-agent-tokens", "task"],
  ] as const) {
    it(`${name}: the sub-agent the ${tool} tool starts is a sub_agent segment under main, main one trajectory`, () => {
      const fixture = loadCliFixture(name);
      const rec = reconstruct(fixture);
      const kinds = countBy(rec.segments, (s) => s.kind);
      assert.equal(kinds["sub_agent"], 1);
      assert.equal(kinds["main"], 1);
      const sub = rec.segments.find((s) => s.kind === "sub_agent")!;
      const main = rec.segments.find((s) => s.kind === "main")!;
      const messagesOf = (seq: number) =>
        chatMessages(
          fixture,
          fixture.calls.findIndex((c) => c.seq === seq),
        );
      // Main called the tool with the sub-agent's task; the sub-agent's conversation opens with that task.
      const delegating = messagesOf(main.callSeqs[1]!).find((m) => m["role"] === "assistant" && m["tool_calls"]);
      assert.match(JSON.stringify(delegating), new RegExp(`"name":"${tool}".*SUBTASK:`));
      const opening = messagesOf(sub.firstCallSeq).filter((m) => m["role"] === "user");
      assert.match(JSON.stringify(opening.at(-1)), /SUBTASK:/);
      assert.equal(sub.parentId, main.id);
      assert.ok(main.callSeqs.length >= 3);
      assert.equal(rec.trajectories.filter((t) => t.segment === "main").length, 1);
      assert.deepEqual(
        rec.breaks.map((b) => b.kind),
        ["sub_agent"],
      );
      assertTrainedOnce(rec);
    });
  }

  it("Codex sub-agent, messages mode: the <subagent_notification> user turn makes Qwen3's template drop main's reasoning — a break that says so", () => {
    const fixture = loadCliFixture("codex-sub-agent-messages");
    const rec = reconstruct(fixture);
    assert.deepEqual(
      countBy(rec.segments, (s) => s.kind),
      { main: 1, sub_agent: 1 } as Record<SegmentKind, number>,
    );
    const last = chatMessages(fixture, fixture.calls.length - 1);
    const notification = last[last.length - 1]!;
    assert.equal(notification["role"], "user");
    assert.match(String(notification["content"]), /^<subagent_notification>/);
    const split = rec.breaks.filter((b) => b.kind === "reserialization");
    assert.equal(split.length, 1);
    assert.equal(split[0]!.callSeq, fixture.calls[fixture.calls.length - 1]!.seq);
    assert.equal(split[0]!.offsetInCompletion, 0);
    assert.equal(split[0]!.cause, "reasoning_dropped");
    assertTrainedOnce(rec);
  });

  it("Qwen Code continued (--continue), tokens mode: the harness rewrote its startup context, so each prompt is a thread whose break says context_changed", () => {
    const fixture = loadCliFixture("qwen-code-continued-tokens");
    // The folder listing in Qwen Code's first user message shows the files the first prompt wrote.
    const first = String(JSON.stringify(chatMessages(fixture, 0)[1]!["content"]));
    const third = String(JSON.stringify(chatMessages(fixture, 2)[1]!["content"]));
    assert.notEqual(first, third);
    assert.match(third, /f1/);
    assert.equal(fixture.calls[2]!.prompt?.newThread, "no_earlier_answer_matched");
    const rec = reconstruct(fixture);
    const breaks = rec.breaks.map((b) => [b.kind, b.cause]);
    assert.deepEqual(breaks, [
      ["branch", "context_changed"],
      ["branch", "context_changed"],
    ]);
    assert.equal(rec.trajectories.filter((t) => t.trained).length, 3);
    assertTrainedOnce(rec);
  });

  it("OpenCode, 24 calls, tokens mode: one main trajectory that continues every call, the title call auxiliary", () => {
    const fixture = loadCliFixture("opencode-long-tokens");
    assert.ok(fixture.calls.length >= 24);
    const rec = reconstruct(fixture);
    assert.deepEqual(rec.breaks, []);
    assert.deepEqual(
      countBy(rec.trajectories, (t) => t.segment),
      { main: 1, auxiliary: 1 },
    );
    const main = rec.trajectories.find((t) => t.segment === "main")!;
    const unique = rec.stats.uniqueTokens;
    const auxiliary = rec.trajectories.find((t) => t.segment === "auxiliary")!;
    assert.ok(main.tokenIds.length / (unique - auxiliary.tokenIds.length) <= 1.02);
    assertTrainedOnce(rec);
  });
});
