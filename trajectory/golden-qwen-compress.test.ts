// Golden test from the real Qwen Code 0.24.4 CLI (scripts/capture-qwen-compress.ts: a session, then
// `qwen --continue -p /compress`, then `qwen --continue -p …`, through a tokens-mode gateway and the sim). Qwen Code
// 0.2x sends its summarizing request appended to the agent's own history, under the agent's system prompt and with its
// tools, and goes on from the summary: the summarizer is auxiliary and the thread after it compaction, as for Claude
// Code's `/compact` and Codex (trajectory/README.md, segments.ts `detachSummarizers`), never main.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { reconstructRollout } from "./reconstruct.ts";
import { fixtureCalls, loadCliFixture, unpackBody, type CliFixture } from "./testing/cli-fixtures.ts";

type Message = { role: string; content: unknown };

function messages(fixture: CliFixture, i: number): Message[] {
  return unpackBody(fixture, fixture.calls[i]!.received)["messages"] as Message[];
}

const text = (m: Message) => JSON.stringify(m.content);

describe("golden: Qwen Code 0.24 /compress (tokens mode)", () => {
  const fixture = loadCliFixture("qwen-code-0.24-compress-tokens");
  const seqs = fixture.calls.map((c) => c.seq);
  const index = (seq: number) => seqs.indexOf(seq);

  it("the CLI's requests: the summarizing request is the agent's history plus a request for a <state_snapshot>", () => {
    assert.equal(fixture.calls.length, 7);
    for (const call of fixture.calls) assert.equal(call.prompt?.mode, "tokens");
    const main = messages(fixture, 3);
    const summarizer = messages(fixture, 4);
    assert.equal(text(summarizer[0]!), text(main[0]!), "the agent's system prompt");
    assert.equal(fixture.calls[4]!.tools, fixture.calls[3]!.tools, "the agent's tools");
    assert.deepEqual(
      summarizer.slice(2, main.length).map(text),
      main.slice(2).map(text),
      "the agent's history (its startup context is rewritten on --continue)",
    );
    assert.equal(summarizer.length, main.length + 2);
    assert.match(text(summarizer.at(-1)!), /produce the <state_snapshot>/);
    // The call after it starts from the summary.
    assert.match(JSON.stringify(messages(fixture, 5)), /state_snapshot/);
  });

  it("reconstructed: main 1, the summarizer auxiliary, the thread after it compaction; each sampled token trained once", () => {
    const calls = fixtureCalls(fixture);
    const rec = reconstructRollout(calls, { rolloutId: fixture.session });
    assert.deepEqual(
      rec.segments.map((s) => [
        s.kind,
        s.callSeqs.map(index),
        s.parentId === null ? null : rec.segments[s.parentId]!.kind,
      ]),
      [
        ["main", [0, 1, 2, 3], null],
        ["compaction", [5, 6], "main"],
        ["auxiliary", [4], "main"],
      ],
    );
    assert.deepEqual(
      rec.breaks.map((b) => [b.kind, index(b.callSeq), index(b.from!.callSeq)]),
      [["compaction", 5, 4]],
    );
    assert.deepEqual(
      rec.trajectories.map((t) => [t.segment, t.trained]),
      [
        ["main", true],
        ["auxiliary", false],
        ["compaction", false],
      ],
    );
    // The summary is not trained with the task's reward; main's work is, once.
    const summarizer = rec.trajectories.find((t) => t.segment === "auxiliary")!;
    assert.ok(summarizer.spans.some((s) => index(s.callSeq) === 4 && s.kind === "untrained"));
    assert.equal(rec.stats.retainedTrajectories, 1);
    assert.equal(rec.flags.flagged, false);
    // Training every kind trains every sampled token exactly once.
    const all = reconstructRollout(calls, {
      rolloutId: fixture.session,
      trainSegments: ["main", "compaction", "auxiliary"],
    });
    assert.equal(all.stats.trainedTokens, all.stats.sampledTokens);
    let masked = 0;
    for (const t of all.trajectories) for (const m of t.lossMask) masked += m;
    assert.equal(masked, all.stats.sampledTokens);
  });
});
