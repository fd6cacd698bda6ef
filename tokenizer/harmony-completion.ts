// What a gpt-oss model samples for one assistant turn, in harmony's output form (openai/harmony docs/format.md): its
// reasoning on the analysis channel, a preamble on commentary, then either the answer on final ended by `<|return|>`
// or a call written as `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}` ended by `<|call|>`.
// `<|call|>` and `<|return|>` are stop tokens (vLLM stops every gpt-oss request at them), so a turn holds one call.
import { HARMONY_TOKENS as T } from "./harmony-render.ts";
import { pyJsonAscii } from "./py-json.ts";

export interface HarmonyTurnInput {
  reasoning: string | null;
  content: string;
  calls: ReadonlyArray<{ name: string; arguments: string | Record<string, unknown> }>;
}

export interface HarmonyTurn {
  /** The sampled text up to its stop token, special tokens written out (the generation prompt's `<|start|>assistant` not included). */
  text: string;
  /** The stop token that ends it: `<|call|>` after a call, `<|return|>` after a final answer. */
  stop: string;
}

// Arguments as vLLM's openai parser returns them (json.dumps of the parsed JSON), so that a harness echoing them back
// gives the text the model wrote.
function argumentsText(args: string | Record<string, unknown>): string {
  if (typeof args !== "string") return pyJsonAscii(args);
  try {
    return pyJsonAscii(JSON.parse(args));
  } catch {
    return args;
  }
}

export function writeHarmonyTurn(turn: HarmonyTurnInput): HarmonyTurn {
  const messages: string[] = [];
  if (turn.reasoning) messages.push(`${T.channel}analysis${T.message}${turn.reasoning}`);
  const call = turn.calls[0];
  if (call) {
    if (turn.content) messages.push(`${T.channel}commentary${T.message}${turn.content}`);
    messages.push(
      `${T.channel}commentary to=functions.${call.name} ${T.constrain}json${T.message}${argumentsText(call.arguments)}`,
    );
  } else messages.push(`${T.channel}final${T.message}${turn.content}`);
  return { text: messages.join(`${T.end}${T.start}assistant`), stop: call ? T.call : T.return };
}
