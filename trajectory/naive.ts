// The naive reconstruction: every sequence kept whole, every prompt compared with every earlier sequence, every
// position's sampler found by comparing prefixes. It follows the rules literally and shares no data structure with
// the prefix tree, so it is the oracle of the property tests and the baseline of `bench/trajectory.ts`.
import { assemble } from "./assemble.ts";
import { callShape, noteCall, prepareCall, type CallNote } from "./call-tokens.ts";
import { countTurns, divergesInSystemPrompt, QWEN3_CHAT_FORMAT } from "./chat-format.ts";
import { SegmentBook } from "./segments.ts";
import { contentRange, GramIndex, markupBreakOwner, movedContext } from "./thread-rules.ts";
import { attachCall, type Emitter, type SeqRecord, type TrajectorySource, type TreeCall } from "./source.ts";
import type { CallTokens, ReconstructOptions, Reconstruction, TokenIds } from "./types.ts";

interface NaiveSeq extends SeqRecord {
  tokens: Int32Array;
  callIndex: number;
}

function lcp(a: Int32Array, b: Int32Array): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

export function naiveReconstruct(calls: readonly CallTokens[], options: ReconstructOptions): Reconstruction {
  const format = options.chatFormat ?? QWEN3_CHAT_FORMAT;
  const segments = new SegmentBook();
  const seqs: NaiveSeq[] = [];
  const treeCalls: TreeCall[] = [];
  const notes: CallNote[] = [];
  const prompts: TokenIds[] = [];
  // lcps[a][b] for b < a.
  const lcps: Int32Array[] = [];
  const common = (a: number, b: number): number => (a === b ? seqs[a]!.length : a > b ? lcps[a]![b]! : lcps[b]![a]!);

  for (const call of [...calls].sort((a, b) => a.callSeq - b.callSeq)) {
    const p = prepareCall(call);
    notes.push(noteCall(p));
    if (!p.usable) continue;
    const P = p.prompt;
    const callIndex = treeCalls.length;
    const firstId = seqs.length;
    const newSeqs: NaiveSeq[] = p.choices.map((choice, k) => {
      const tokens = new Int32Array(P.length + choice.tokenIds.length);
      for (let i = 0; i < P.length; i++) tokens[i] = P[i]!;
      for (let i = 0; i < choice.tokenIds.length; i++) tokens[P.length + i] = choice.tokenIds[i]!;
      return {
        id: firstId + k,
        callSeq: call.callSeq,
        choiceIndex: choice.index,
        promptLength: P.length,
        length: tokens.length,
        trusted: p.trusted,
        segmentId: -1,
        logprobs: choice.logprobs,
        tokens,
        callIndex,
      };
    });
    for (const s of newSeqs) {
      const row = new Int32Array(s.id);
      for (let t = 0; t < s.id; t++)
        row[t] = lcp(s.tokens, t < firstId ? seqs[t]!.tokens : newSeqs[t - firstId]!.tokens);
      lcps.push(row);
    }
    // How far the prompt matches each earlier sequence.
    const first = newSeqs[0]!;
    const promptLcp = (t: number): number => Math.min(P.length, lcps[first.id]![t]!);
    let matched = 0;
    for (let t = 0; t < firstId; t++) matched = Math.max(matched, promptLcp(t));
    let identical: number | null = null;
    let extended: number | null = null;
    let oldBranch: number | null = null;
    for (let t = 0; t < firstId; t++) {
      const s = seqs[t]!;
      const l = promptLcp(t);
      if (matched === P.length && s.promptLength === P.length && l === P.length) identical = t;
      if (s.length === matched && l === matched) extended = t;
      if (l === matched && s.length > matched) oldBranch = t;
    }
    const facts = {
      empty: firstId === 0,
      promptLength: P.length,
      matched,
      identical,
      extended,
      oldBranch,
      oldOwner: oldBranch === null ? null : ownerAt(oldBranch, matched),
      oldToken: oldBranch === null || matched >= seqs[oldBranch]!.length ? null : seqs[oldBranch]!.tokens[matched]!,
      format,
      inSystemPrompt: () => divergesInSystemPrompt(P, matched, format),
      fewerTurns: () => countTurns(P, format) < countTurns(prompts[seqs[oldBranch!]!.callIndex]!, format),
      markupOwner: () =>
        markupBreakOwner(P, matched, format, (i) => {
          const old = seqs[oldBranch!]!;
          return i < old.length ? { token: old.tokens[i]!, sampledBy: ownerAt(oldBranch!, i) } : null;
        }),
      movedContext: () => {
        const old = seqs[oldBranch!]!;
        return movedContext(P, matched, format, (i) => (i < old.length ? old.tokens[i]! : null), old.promptLength);
      },
      summarySource: () => {
        const index = new GramIndex(P, format);
        for (let t = firstId - 1; t >= 0; t--) {
          const sampled = seqs[t]!.tokens.subarray(seqs[t]!.promptLength);
          const [start, end] = contentRange(sampled, format);
          if (index.holdsSummary(sampled, start, end)) return t;
        }
        return null;
      },
    };
    const { attach, brk } = attachCall(call.callSeq, P.length, facts, seqs, segments, callShape(p));
    for (const s of newSeqs) {
      s.segmentId = attach.segmentId;
      seqs.push(s);
    }
    treeCalls.push({ callSeq: call.callSeq, promptLength: P.length, attach, brk, seqIds: newSeqs.map((s) => s.id) });
    prompts.push(P);
  }

  // First trusted sequence (else first untrusted) sampling position i of sequence r's path.
  function ownerAt(r: number, i: number): number | null {
    for (const trusted of [true, false]) {
      for (let t = 0; t < seqs.length; t++) {
        const s = seqs[t]!;
        if (s.trusted === trusted && s.promptLength <= i && i < s.length && common(r, t) > i) return t;
      }
    }
    return null;
  }

  function isDead(id: number): boolean {
    const s = seqs[id]!;
    return treeCalls.some((c) => {
      if (c.callSeq <= s.callSeq || c.promptLength !== s.promptLength) return false;
      return common(c.seqIds[0]!, id) >= s.promptLength;
    });
  }

  function leafGroups(): number[][] {
    const groups: number[][] = [];
    const placed = new Set<number>();
    for (const s of seqs) {
      if (placed.has(s.id)) continue;
      const extendedByOther = seqs.some((t) => t.length > s.length && common(s.id, t.id) >= s.length);
      if (extendedByOther) continue;
      const group = seqs.filter((t) => t.length === s.length && common(s.id, t.id) >= s.length).map((t) => t.id);
      for (const id of group) placed.add(id);
      groups.push(group);
    }
    return groups;
  }

  function emitter(): Emitter {
    const done: Array<{ rep: number; mask: Uint8Array }> = [];
    return (rep, trained) => {
      const leaf = seqs[rep]!;
      const L = leaf.length;
      const tokenIds = Int32Array.from(leaf.tokens);
      const attribution = new Int32Array(L).fill(-1);
      const logprobs = new Float32Array(L);
      const lossMask = new Uint8Array(L);
      const lpOf = (s: NaiveSeq, i: number): number =>
        !s.trusted ? 0 : s.logprobs === null ? NaN : s.logprobs[i - s.promptLength]!;
      // Credit order: trusted wholly on the path (latest), first trusted sampler, untrusted wholly on the path
      // (latest), first untrusted sampler.
      for (const trusted of [true, false]) {
        const onPath = new Int32Array(L).fill(-1);
        for (const s of seqs) {
          if (s.trusted !== trusted || common(rep, s.id) < s.length) continue;
          for (let i = s.promptLength; i < s.length; i++) onPath[i] = s.id;
        }
        for (let i = 0; i < L; i++) if (attribution[i] === -1 && onPath[i] !== -1) attribution[i] = onPath[i]!;
        for (const s of seqs) {
          if (s.trusted !== trusted) continue;
          const end = Math.min(s.length, common(rep, s.id));
          for (let i = s.promptLength; i < end; i++) if (attribution[i] === -1) attribution[i] = s.id;
        }
      }
      for (let i = 0; i < L; i++) if (attribution[i] !== -1) logprobs[i] = lpOf(seqs[attribution[i]!]!, i);
      if (trained) {
        const covered = new Uint8Array(L);
        for (const d of done) {
          const end = common(rep, d.rep);
          for (let i = 0; i < end; i++) if (d.mask[i] === 1) covered[i] = 1;
        }
        for (let i = 0; i < L; i++) {
          const a = attribution[i]!;
          if (a >= 0 && seqs[a]!.trusted && covered[i] === 0) lossMask[i] = 1;
        }
        done.push({ rep, mask: lossMask });
      }
      const promptCalls = treeCalls.filter((c) => common(rep, c.seqIds[0]!) >= c.promptLength).map((c) => c.callSeq);
      return { tokenIds, lossMask, logprobs, attribution, promptCalls };
    };
  }

  function uniqueTokens(): number {
    let n = 0;
    for (const s of seqs) {
      let shared = 0;
      for (let t = 0; t < s.id; t++) shared = Math.max(shared, common(s.id, t));
      n += s.length - shared;
    }
    return n;
  }

  function sampledTokens(): number {
    let n = 0;
    for (const s of seqs) {
      if (!s.trusted) continue;
      const seen = new Uint8Array(s.length);
      for (let t = 0; t < s.id; t++) {
        const u = seqs[t]!;
        if (!u.trusted) continue;
        const end = Math.min(u.length, common(s.id, t));
        for (let i = u.promptLength; i < end; i++) seen[i] = 1;
      }
      for (let i = s.promptLength; i < s.length; i++) if (seen[i] === 0) n++;
    }
    return n;
  }

  const source: TrajectorySource = {
    seqs,
    treeCalls,
    notes,
    segments,
    leafGroups,
    isDead,
    emitter,
    uniqueTokens,
    sampledTokens,
  };
  return assemble(source, options);
}
