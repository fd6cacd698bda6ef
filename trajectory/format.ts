// Text rendering of a reconstruction for `rlgate show`: a summary, the segments, the call tree (who attached where,
// branches, breaks), and each trajectory's text with sampled spans set apart from context, in ANSI colours or, with
// colour off, in brackets: ⟦#call.choice trained⟧ ⟨#call.choice sampled, trained elsewhere⟩ ⟮#call.choice segment not
// trained⟯ ⟪#call.choice! untrusted⟫.
import type { Break, BreakCause, CallSummary, Reconstruction, SampledSpan, Trajectory } from "./types.ts";

export interface FormatOptions {
  /** Ids to text (e.g. the Qwen3 tokenizer's decode, special tokens kept). */
  detokenize: (ids: readonly number[]) => string;
  /** ANSI colours; off by default. */
  color?: boolean;
  /** Context runs longer than this many characters show their head and tail only. Default 240; Infinity shows all. */
  maxContextChars?: number;
  /** Which trajectories to print in full (by id); default all. */
  trajectoryIds?: readonly string[];
}

const ANSI = {
  reset: "\x1b[0m",
  dim: "\x1b[2m",
  bold: "\x1b[1m",
  green: "\x1b[32m",
  cyan: "\x1b[36m",
  red: "\x1b[31m",
  yellow: "\x1b[33m",
};
type Style = keyof typeof ANSI;

class Painter {
  constructor(readonly color: boolean) {}
  paint(text: string, ...styles: Style[]): string {
    if (!this.color || styles.length === 0 || text === "") return text;
    return styles.map((s) => ANSI[s]).join("") + text + ANSI.reset;
  }
}

const SPAN_STYLE: Record<SampledSpan["kind"], { open: string; close: string; style: Style; mark: string }> = {
  trained: { open: "⟦", close: "⟧", style: "green", mark: "" },
  shared: { open: "⟨", close: "⟩", style: "cyan", mark: "" },
  untrained: { open: "⟮", close: "⟯", style: "yellow", mark: "" },
  untrusted: { open: "⟪", close: "⟫", style: "red", mark: "!" },
};

const PLURALS: Record<string, string> = { leaf: "leaves", trajectory: "trajectories", call: "calls" };

function plural(n: number, word: string): string {
  return `${n} ${n === 1 ? word : (PLURALS[word] ?? `${word}s`)}`;
}

function ref(r: { callSeq: number; choiceIndex: number } | null): string {
  return r === null ? "-" : `#${r.callSeq}.${r.choiceIndex}`;
}

/** Why a break split the trajectory, in the words `rlgate show` prints. */
const CAUSE_TEXT: Record<BreakCause, string> = {
  reasoning_dropped:
    "the earlier turn is rendered without its reasoning (the chat template drops the reasoning of turns before the last user message; tokens mode keeps the sampled ids)",
  context_changed:
    "the harness changed context it wrote itself (a user or tool message) between calls: old and new context are each a trajectory",
  ephemeral_context:
    "the harness dropped the context message it had put last and re-sent it after the answer (OpenClaw's internal context): expected, each call is what the model saw, trained once in the agent's segment",
};

export function describeBreak(b: Break): string {
  const where =
    b.kind === "reserialization"
      ? b.offsetInCompletion !== null && b.offsetInCompletion < 0
        ? `in the markup ${-b.offsetInCompletion} tokens before ${ref(b.from)}'s completion`
        : `in ${ref(b.from)}'s completion at +${b.offsetInCompletion}`
      : b.kind === "retry"
        ? `same prompt as ${ref(b.from)}`
        : `from ${ref(b.from)}`;
  const why = b.cause === undefined ? "" : ` — ${b.cause}: ${CAUSE_TEXT[b.cause]}`;
  return `${b.kind} @${b.at} ${where} (-${b.oldTokens} old / +${b.newTokens} new tokens)${why}`;
}

export function formatSummary(rec: Reconstruction, color = false): string {
  const p = new Painter(color);
  const s = rec.stats;
  const lines: string[] = [];
  lines.push(
    `${p.paint(`rollout ${rec.rolloutId}`, "bold")} · ${plural(s.calls, "call")} (${s.treeCalls} in tree) · ` +
      `${plural(s.leaves, "leaf")}, ${s.deadLeaves} dead · ${plural(rec.trajectories.length, "trajectory")} (${s.retainedTrajectories} trained)`,
  );
  lines.push(
    `tokens: unique ${s.uniqueTokens} · sampled ${s.sampledTokens} · trained ${s.trainedTokens} · ` +
      `in trained trajectories ${s.trajectoryTokens} · amplification ${s.amplification.toFixed(2)}×`,
  );
  const breaks = Object.entries(s.breaks)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`);
  lines.push(`breaks: ${breaks.length > 0 ? breaks.join(" · ") : "none"}`);
  if (rec.flags.flagged) lines.push(p.paint(`FLAGGED: ${rec.flags.reasons.join("; ")}`, "red", "bold"));
  const moved = rec.flags.ephemeralContextLeaves ?? 0;
  if (moved > 0)
    lines.push(
      `ephemeral context (expected): ${plural(moved, "call")} ended with a context message the next call moved ` +
        `behind its answer; each is its own trajectory in the agent's segment, every sampled token trained once, ` +
        `not counted against the leaf limit (${rec.flags.maxLeaves})`,
    );
  if (rec.flags.failedCalls.length > 0)
    lines.push(`failed calls (not trained): ${rec.flags.failedCalls.map((c) => `#${c}`).join(" ")}`);
  return lines.join("\n");
}

export function formatSegments(rec: Reconstruction): string {
  const lines = ["segments:"];
  for (const seg of rec.segments) {
    const parent = seg.parentId === null ? "" : ` ← #${seg.parentId}`;
    lines.push(
      `  #${seg.id} ${seg.kind}${parent} ${seg.trained ? "(trained)" : "(not trained)"} · calls ${seg.callSeqs.map((c) => `#${c}`).join(" ")}`,
    );
  }
  return lines.join("\n");
}

function callLine(call: CallSummary, rec: Reconstruction, p: Painter): string {
  const head = p.paint(`#${call.callSeq}`, "bold");
  const choices = call.choices
    .map((c) => `c${c.index} ${c.sampledTokens} tok ${c.fate === "leaf" ? `→ ${c.trajectoryId}` : c.fate}`)
    .join(" | ");
  if (call.attach === null) {
    const why = call.status !== "ok" ? call.status : `token ids ${call.tokenSource}`;
    return `${head} ${p.paint(`not in tree (${why})`, "red")} ${choices}`;
  }
  const a = call.attach;
  const seg = rec.segments[a.segmentId]!;
  const brk = rec.breaks.find((b) => b.callSeq === call.callSeq);
  const how =
    brk !== undefined
      ? p.paint(describeBreak(brk), "yellow")
      : a.kind === "root" || a.kind === "auxiliary"
        ? a.kind
        : `${a.kind === "extend" ? "extends" : a.kind} ${ref(a.ref)}`;
  const untrusted = call.tokenSource === "upstream" ? "" : p.paint(` [${call.tokenSource}]`, "red");
  return `${head} ${seg.kind}#${seg.id} ${how} · prompt ${a.promptTokens} (+${a.promptTokens - a.matchedTokens}) · ${choices}${untrusted}`;
}

/** The calls as a tree: each call under the call it attached to; a chain of single children stays at one level. */
export function formatCallTree(rec: Reconstruction, color = false): string {
  const p = new Painter(color);
  const children = new Map<number | null, CallSummary[]>();
  const outside: CallSummary[] = [];
  for (const call of rec.calls) {
    if (call.attach === null) {
      outside.push(call);
      continue;
    }
    const parent = call.attach.ref?.callSeq ?? null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent)!.push(call);
  }
  const lines = ["calls:"];
  const walk = (call: CallSummary, prefix: string, branch: string): void => {
    lines.push(`${prefix}${branch}${callLine(call, rec, p)}`);
    let kids = children.get(call.callSeq) ?? [];
    const indent = prefix + (branch === "" ? "" : branch === "└ " ? "  " : "│ ");
    // Follow single-child chains without indenting (a linear session stays flat).
    while (kids.length === 1) {
      const next = kids[0]!;
      lines.push(`${indent}${callLine(next, rec, p)}`);
      kids = children.get(next.callSeq) ?? [];
    }
    kids.forEach((kid, i) => walk(kid, indent, i === kids.length - 1 ? "└ " : "├ "));
  };
  for (const root of children.get(null) ?? []) walk(root, "  ", "");
  for (const call of outside) lines.push(`  ${callLine(call, rec, p)}`);
  return lines.join("\n");
}

export function formatTrajectory(t: Trajectory, options: FormatOptions): string {
  const p = new Painter(options.color ?? false);
  const max = options.maxContextChars ?? 240;
  const trained = t.lossMask.reduce((n, m) => n + m, 0);
  const header =
    `${p.paint(`trajectory ${t.trajectoryId}`, "bold")} · ${t.segment}#${t.segmentId} · ${t.trained ? "trained" : "not trained"} · ` +
    `${t.tokenIds.length} tokens, ${trained} ${t.trained ? "trained" : "its own (not trained)"} · leaf ${ref(t.leaf)} · reward ${t.reward ?? "-"}`;
  const lines = [header];
  for (const b of t.breaks) lines.push(`  break: #${b.callSeq} ${describeBreak(b)}`);

  // Context runs, sampled spans, and a marker where each break on this path leaves the old branch.
  const ids = Array.from(t.tokenIds);
  const breaks = [...t.breaks].sort((a, b) => a.at - b.at);
  let text = "";
  let i = 0;
  let nextSpan = 0;
  let nextBreak = 0;
  while (i < ids.length || nextBreak < breaks.length) {
    while (nextBreak < breaks.length && breaks[nextBreak]!.at <= i) {
      const b = breaks[nextBreak++]!;
      text += p.paint(`⌁${b.kind} #${b.callSeq}⌁`, "yellow");
    }
    if (i >= ids.length) break;
    const span = t.spans[nextSpan];
    if (span !== undefined && span.start === i) {
      const style = SPAN_STYLE[span.kind];
      const label = `#${span.callSeq}.${span.choiceIndex}${style.mark}`;
      const body = options.detokenize(ids.slice(span.start, span.end));
      text += options.color
        ? p.paint(`${label}▸`, "dim") + p.paint(body, style.style)
        : `${style.open}${label} ${body}${style.close}`;
      i = span.end;
      nextSpan++;
      continue;
    }
    const breakPos = nextBreak < breaks.length ? breaks[nextBreak]!.at : ids.length;
    const end = Math.min(span?.start ?? ids.length, breakPos, ids.length);
    text += elide(options.detokenize(ids.slice(i, end)), end - i, max, p);
    i = end;
  }
  lines.push(text);
  return lines.join("\n");
}

function elide(text: string, tokens: number, max: number, p: Painter): string {
  if (text.length <= max) return text;
  const half = Math.floor(max / 2);
  return text.slice(0, half) + p.paint(` … ${tokens} context tokens … `, "dim") + text.slice(text.length - half);
}

/** Everything `rlgate show` prints for one rollout. */
export function formatReconstruction(rec: Reconstruction, options: FormatOptions): string {
  const color = options.color ?? false;
  const parts = [formatSummary(rec, color), formatSegments(rec), formatCallTree(rec, color)];
  const legend = color
    ? `legend: ${new Painter(true).paint("trained", "green")} · ${new Painter(true).paint("sampled, trained elsewhere", "cyan")} · ${new Painter(true).paint("segment not trained", "yellow")} · ${new Painter(true).paint("untrusted ids", "red")} · context plain`
    : "legend: ⟦trained⟧ ⟨sampled, trained elsewhere⟩ ⟮segment not trained⟯ ⟪untrusted ids⟫ · context plain · ⌁break⌁";
  parts.push(legend);
  for (const t of rec.trajectories) {
    if (options.trajectoryIds !== undefined && !options.trajectoryIds.includes(t.trajectoryId)) continue;
    parts.push(formatTrajectory(t, options));
  }
  return parts.join("\n\n");
}
