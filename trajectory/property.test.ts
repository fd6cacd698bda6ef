// Property tests on random call sequences (seeded): the prefix tree agrees with the naive reference on everything,
// and its trajectories obey the rules checked here from the raw calls alone.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { naiveReconstruct } from "./naive.ts";
import { reconstructRollout } from "./reconstruct.ts";
import { randomCalls } from "./testing/random-calls.ts";
import type { CallTokens, Reconstruction, SegmentKind } from "./types.ts";

const CASES = 400;
const ALL_SEGMENTS: SegmentKind[] = ["main", "sub_agent", "compaction", "auxiliary"];

interface Sampled {
  seq: number[];
  promptLength: number;
  logprobs: ArrayLike<number> | null;
  trusted: boolean;
  fate: string;
  segmentTrained: boolean;
}

function sampledSequences(calls: readonly CallTokens[], rec: Reconstruction): Sampled[] {
  const out: Sampled[] = [];
  for (const call of calls) {
    const summary = rec.calls.find((c) => c.callSeq === call.callSeq)!;
    if (summary.attach === null) continue;
    const segment = rec.segments[summary.attach.segmentId]!;
    for (const choice of call.choices) {
      const fate = summary.choices.find((c) => c.index === choice.index)!.fate;
      if (fate === "not_in_tree") continue;
      out.push({
        seq: [...Array.from(call.promptIds!), ...Array.from(choice.tokenIds!)],
        promptLength: call.promptIds!.length,
        logprobs:
          choice.logprobs !== null && choice.logprobs.length === choice.tokenIds!.length ? choice.logprobs : null,
        trusted: call.tokenSource === "upstream",
        fate,
        segmentTrained: segment.trained,
      });
    }
  }
  return out;
}

function hasPrefix(tokens: Int32Array, prefix: readonly number[], length: number): boolean {
  if (tokens.length < length) return false;
  for (let i = 0; i < length; i++) if (tokens[i] !== prefix[i]) return false;
  return true;
}

function checkRules(calls: readonly CallTokens[], rec: Reconstruction, seed: number): void {
  const sampled = sampledSequences(calls, rec);
  const where = `seed ${seed}`;
  for (const t of rec.trajectories) {
    // Every trajectory is the prompt plus completion of its leaf call.
    const call = calls.find((c) => c.callSeq === t.leaf.callSeq)!;
    const choice = call.choices.find((c) => c.index === t.leaf.choiceIndex)!;
    assert.deepEqual(
      [...t.tokenIds],
      [...Array.from(call.promptIds!), ...Array.from(choice.tokenIds!)],
      `${where}: ${t.trajectoryId} tokens`,
    );
    assert.equal(t.lossMask.length, t.tokenIds.length);
    assert.equal(t.logprobs.length, t.tokenIds.length);
    // An untrained trajectory's mask 1 marks what it would train: spans named "untrained", never "trained".
    for (const span of t.spans)
      if (span.kind === (t.trained ? "untrained" : "trained"))
        assert.fail(`${where}: ${span.kind} span in ${t.trajectoryId}`);
    const inSpan = new Uint8Array(t.tokenIds.length);
    for (const span of t.spans) inSpan.fill(1, span.start, span.end);
    for (let i = 0; i < t.tokenIds.length; i++) {
      if (inSpan[i] === 0) {
        assert.equal(t.lossMask[i], 0, `${where}: context position ${i} of ${t.trajectoryId} is mask 1`);
        assert.equal(t.logprobs[i], 0, `${where}: context position ${i} has a logprob`);
      }
      if (t.lossMask[i] !== 1) continue;
      // Nothing mask 1 is context: a trusted call sampled this very position, with this logprob.
      const samplers = sampled.filter(
        (s) => s.trusted && s.promptLength <= i && i < s.seq.length && hasPrefix(t.tokenIds, s.seq, i + 1),
      );
      assert.ok(samplers.length > 0, `${where}: ${t.trajectoryId}[${i}] is mask 1 but no trusted call sampled it`);
      const lp = t.logprobs[i]!;
      assert.ok(
        samplers.some((s) =>
          s.logprobs === null ? Number.isNaN(lp) : Math.fround(s.logprobs[i - s.promptLength]!) === lp,
        ),
        `${where}: ${t.trajectoryId}[${i}] logprob ${lp} is no sampler's`,
      );
    }
  }
  // Every sampled token is mask 1 in exactly one trained trajectory when its own leaf is kept; never in two. Counting
  // untrained trajectories too, it is mask 1 exactly once wherever a trajectory holds it.
  for (const s of sampled) {
    if (!s.trusted) continue;
    for (let i = s.promptLength; i < s.seq.length; i++) {
      const holders = rec.trajectories.filter((t) => hasPrefix(t.tokenIds, s.seq, i + 1));
      const trainedHolders = holders.filter((t) => t.trained);
      const masks = trainedHolders.filter((t) => t.lossMask[i] === 1).length;
      if (trainedHolders.length > 0 || (s.fate === "leaf" && s.segmentTrained)) {
        assert.equal(masks, 1, `${where}: sampled position ${i} of a ${s.fate} is mask 1 in ${masks} trajectories`);
      }
      const all = holders.filter((t) => t.lossMask[i] === 1).length;
      if (holders.length > 0)
        assert.equal(all, 1, `${where}: sampled position ${i} is mask 1 in ${all} trajectories of any segment`);
    }
  }
  // Untrusted (retokenized) samples are never trained.
  for (const t of rec.trajectories) {
    for (const span of t.spans)
      if (span.kind === "untrusted") {
        for (let i = span.start; i < span.end; i++) assert.equal(t.lossMask[i], 0);
      }
  }
  // Exactly one main agent whenever there is a segment; auxiliary segments are one-shot calls that offered no tools,
  // or the summarizer a compaction starts from.
  if (rec.segments.length > 0)
    assert.equal(rec.segments.filter((s) => s.kind === "main").length, 1, `${where}: one main`);
  const summarizers = new Set(rec.breaks.filter((b) => b.kind === "compaction").map((b) => b.from?.callSeq));
  for (const segment of rec.segments.filter((s) => s.kind === "auxiliary")) {
    for (const seq of segment.callSeqs) {
      assert.ok(
        calls.find((c) => c.callSeq === seq)!.tools === 0 || summarizers.has(seq),
        `${where}: auxiliary call ${seq} offered tools`,
      );
    }
  }
  // Statistics agree with the trajectories.
  const trained = rec.trajectories.filter((t) => t.trained);
  assert.equal(rec.stats.retainedTrajectories, trained.length);
  assert.equal(
    rec.stats.trainedTokens,
    trained.reduce((n, t) => n + t.lossMask.reduce((a, b) => a + b, 0), 0),
  );
  assert.ok(rec.stats.trainedTokens <= rec.stats.sampledTokens, `${where}: trained more than sampled`);
  assert.equal(rec.stats.leaves, rec.stats.deadLeaves + rec.trajectories.length);
}

describe("random call sequences", () => {
  it(`prefix tree equals the naive reference (${CASES} seeds)`, () => {
    for (let seed = 1; seed <= CASES; seed++) {
      const calls = randomCalls(seed);
      const options = {
        rolloutId: `r${seed}`,
        reward: 1,
        trainSegments: seed % 2 === 0 ? ALL_SEGMENTS : undefined,
        maxLeaves: 4,
      };
      const tree = reconstructRollout(calls, options);
      const naive = naiveReconstruct(calls, options);
      assert.deepStrictEqual(tree, naive, `seed ${seed}`);
    }
  });

  it(`trajectories obey the rules (${CASES} seeds, all segments trained and main only)`, () => {
    let breaks = 0;
    let dead = 0;
    let multi = 0;
    for (let seed = 1; seed <= CASES; seed++) {
      const calls = randomCalls(seed);
      for (const trainSegments of [ALL_SEGMENTS, undefined]) {
        const rec = reconstructRollout(calls, { rolloutId: `r${seed}`, trainSegments });
        checkRules(calls, rec, seed);
        breaks += rec.breaks.length;
        dead += rec.stats.deadLeaves;
        multi += rec.trajectories.length > 1 ? 1 : 0;
      }
    }
    // The generator must exercise the interesting cases, or the properties above say little.
    assert.ok(
      breaks > CASES && dead > CASES / 10 && multi > CASES / 4,
      `weak generator: ${breaks} breaks, ${dead} dead, ${multi} multi`,
    );
  });

  it("covers every break kind", () => {
    const kinds = new Set<string>();
    for (let seed = 1; seed <= CASES; seed++)
      for (const b of reconstructRollout(randomCalls(seed), { rolloutId: "r" }).breaks) kinds.add(b.kind);
    assert.deepEqual([...kinds].sort(), ["branch", "compaction", "reserialization", "retry", "sub_agent"]);
  });
});
