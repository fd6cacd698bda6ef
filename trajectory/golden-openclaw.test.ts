// Golden test from the real OpenClaw 2026.9.6 CLI (`openclaw agent --local --message … --json`, provider API
// openai-completions, against a port-0 gateway and the sim, in each prompt mode): every request ends with OpenClaw's
// internal-context user message, which the next request moves behind the answer and the tool result. Each call is its
// own trajectory of the main agent, every break `ephemeral_context`, every sampled token trained once, not flagged.
// In tokens mode each prompt continues the previous one without that message, from the ids the model sampled.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { reconstructRollout } from "./reconstruct.ts";
import { fixtureCalls, loadCliFixture, unpackBody, type CliFixture } from "./testing/cli-fixtures.ts";

type Message = { role: string; content: unknown; tool_calls?: Array<{ id: string }> };

function messages(fixture: CliFixture, i: number): Message[] {
  return unpackBody(fixture, fixture.calls[i]!.received)["messages"] as Message[];
}

function promptOf(fixture: CliFixture, i: number): number[] {
  let ids: number[] = [];
  for (let k = 0; k <= i; k++) ids = [...ids.slice(0, fixture.calls[k]!.shared), ...fixture.calls[k]!.rest];
  return ids;
}

for (const mode of ["tokens", "messages"] as const) {
  describe(`golden: OpenClaw (${mode} mode)`, () => {
    const fixture = loadCliFixture(`openclaw-${mode}`);
    const n = fixture.calls.length;

    it("the CLI's requests end with its internal context, which the next request moves behind the answer", () => {
      assert.ok(n >= 3);
      for (let i = 0; i < n; i++) {
        const last = messages(fixture, i).at(-1)!;
        assert.equal(last.role, "user");
        assert.match(JSON.stringify(last.content), /<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>/);
        if (i === 0) continue;
        const before = messages(fixture, i - 1);
        const now = messages(fixture, i);
        assert.deepEqual(now.slice(0, before.length - 1), before.slice(0, -1), `call ${i}: the history without it`);
        assert.equal(now[before.length - 1]!.role, "assistant");
        // OpenClaw echoes a tool-call id with its letters and digits only, at most 40 of them.
        for (const call of now[before.length - 1]!.tool_calls ?? []) assert.match(call.id, /^[A-Za-z0-9]{1,40}$/);
      }
    });

    it("reconstructed: main only, every break ephemeral_context, every sampled token trained once, not flagged", () => {
      const rec = reconstructRollout(fixtureCalls(fixture), { rolloutId: fixture.session, maxLeaves: 1 });
      assert.deepEqual(
        rec.segments.map((s) => [s.kind, s.callSeqs.length]),
        [["main", n]],
      );
      assert.deepEqual(
        rec.breaks.map((b) => `${b.kind}/${b.cause}`),
        Array(n - 1).fill("branch/ephemeral_context"),
      );
      assert.equal(rec.stats.retainedTrajectories, n);
      assert.equal(rec.stats.trainedTokens, rec.stats.sampledTokens);
      assert.equal(rec.flags.flagged, false, rec.flags.reasons.join("; "));
      assert.equal(rec.flags.ephemeralContextLeaves, n - 1);
    });

    if (mode === "tokens")
      it("each prompt is the previous prompt without its context message, the sampled ids, then the new messages", () => {
        for (let i = 1; i < n; i++) {
          const previous = fixture.calls[i - 1]!;
          const call = fixture.calls[i]!;
          assert.deepEqual(call.prompt?.parent, { seq: previous.seq, choice: 0 });
          assert.equal(call.prompt?.movedContext, true);
          const { start, end } = previous.prompt!.trailingContext!;
          const earlier = promptOf(fixture, i - 1);
          const kept = [...earlier.slice(0, start), ...earlier.slice(end), ...previous.sampled[0]!];
          assert.deepEqual(promptOf(fixture, i).slice(0, kept.length), kept, `call ${i}`);
        }
      });
  });
}
