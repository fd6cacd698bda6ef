// How vLLM renders an earlier gpt-oss assistant turn, for history repair (the Qwen3 rules are in qwen3-turn.ts). vLLM
// turns the chat message into harmony messages (harmony-render.ts): content on commentary (with calls) or final,
// reasoning on analysis, each call as `<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>…<|call|>`,
// a final answer closed by `<|end|>`. The model wrote its call header as `<|channel|>commentary to=functions.NAME
// <|constrain|>json` and closed its answer with `<|return|>`, so no message makes vLLM render a sampled turn again: the
// turn re-serializes whatever is put back, and no text is (a call's arguments still are, by the shared rule).
import type { AssistantText, SampledTurn, TurnRules } from "./qwen3-turn.ts";

function renderedHead(turn: AssistantText): string {
  return turn.content;
}

function sampledHead(turn: SampledTurn): string {
  return turn.content ?? "";
}

export const GPTOSS_TURN: TurnRules = { renderedHead, sampledHead, faithfulText: () => null };
