// Random call sequences shaped like agent sessions, for property tests: extensions, re-serialized histories, retries,
// sub-agents, compactions, side calls, prompts ending inside earlier sequences, n > 1 choices, failures and missing
// ids. A tiny vocabulary makes accidental sharing (identical completions, shared sampled prefixes) common.
import { seededRandom } from "../../util/seeded-random.ts";
import { QWEN3_CHAT_FORMAT } from "../chat-format.ts";
import type { CallTokens } from "../types.ts";

const { turnStart: IM_START, turnEnd: IM_END } = QWEN3_CHAT_FORMAT;
const SYSTEM = 8948;
const USER = 872;

export function randomCalls(seed: number): CallTokens[] {
  const rand = seededRandom(seed);
  // Tools offered (none, some, unknown) come from a stream of their own, so the sessions stay what they were.
  const shapeRand = seededRandom(seed + 1_000_003);
  const int = (n: number): number => Math.floor(rand() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const tokens = (n: number): number[] => Array.from({ length: n }, () => 1 + int(4));
  const systemTurn = (): number[] => [IM_START, SYSTEM, ...tokens(1 + int(2)), IM_END];
  const context = (): number[] =>
    rand() < 0.7 ? [IM_END, IM_START, USER, ...tokens(int(3)), IM_START] : tokens(int(3));

  const sequences: number[][] = [];
  const prompts: number[][] = [];
  const calls: CallTokens[] = [];
  const count = 1 + int(12);
  for (let seq = 1; seq <= count; seq++) {
    let prompt: number[];
    const op = rand();
    const last = sequences[sequences.length - 1];
    if (sequences.length === 0 || op < 0.05) {
      prompt = [...(rand() < 0.8 ? systemTurn() : []), IM_START, USER, ...tokens(1 + int(3)), IM_START];
    } else if (op < 0.45) {
      prompt = [...(rand() < 0.7 && last !== undefined ? last : pick(sequences)), ...context()];
    } else if (op < 0.6) {
      const s = pick(sequences);
      prompt = [...s.slice(0, int(s.length + 1)), ...tokens(1 + int(3)), ...context()];
    } else if (op < 0.72) {
      prompt = [...pick(prompts)];
    } else if (op < 0.8) {
      prompt = [...systemTurn(), IM_START, USER, ...tokens(1 + int(2)), IM_START];
    } else if (op < 0.88) {
      const p = pick(prompts);
      const end = p.indexOf(IM_END);
      prompt = [...p.slice(0, end + 1), IM_START, USER, ...tokens(1 + int(2)), IM_START];
    } else {
      const s = pick(sequences);
      prompt = s.slice(0, int(s.length + 1));
    }

    const n = rand() < 0.2 ? 2 + int(2) : 1;
    const sameCompletion = rand() < 0.3 ? tokens(int(4)) : null;
    const completions = Array.from(
      { length: n },
      () => sameCompletion ?? [...tokens(int(5)), ...(rand() < 0.5 ? [IM_END] : [])],
    );
    const r = rand();
    const status = r < 0.08 ? "upstream_error" : r < 0.1 ? "client_aborted" : "ok";
    const t = rand();
    const tokenSource = t < 0.05 ? "missing" : t < 0.1 ? "retokenized" : "upstream";
    const noLogprobs = rand() < 0.05;
    calls.push({
      callSeq: seq * 3 + int(3),
      promptIds: tokenSource === "missing" ? null : prompt,
      choices: completions.map((g, index) => ({
        index,
        tokenIds: tokenSource === "missing" ? null : g,
        logprobs: noLogprobs ? null : g.map(() => -Math.round(rand() * 1000) / 100),
        finishReason: "stop",
      })),
      tokenSource,
      status,
      startedAt: seq,
      tools: shapeRand() < 0.5 ? 0 : shapeRand() < 0.5 ? 2 : null,
    });
    if (status === "ok" && tokenSource !== "missing") {
      prompts.push(prompt);
      for (const g of completions) sequences.push([...prompt, ...g]);
    }
  }
  // Reconstruction must not depend on the order calls are handed over.
  for (let i = calls.length - 1; i > 0; i--) {
    const j = int(i + 1);
    [calls[i], calls[j]] = [calls[j]!, calls[i]!];
  }
  return calls;
}
