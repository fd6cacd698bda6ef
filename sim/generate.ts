// One sampled completion: an assistant turn written in Qwen3's output format (hermes tool calls, or Qwen3-Coder's XML
// ones when the sim serves that parser), tokenized with the real tokenizer, ended by the EOS token and cut by
// max_tokens / stop conditions the way vLLM cuts it.
import type { SimTurn } from "./policy.ts";
import { encodeCached } from "./prompt.ts";
import {
  hermesArguments,
  HERMES,
  type SampledText,
  type ToolCallSpan,
  type ToolSyntax,
} from "../tokenizer/output-parser.ts";
import { writeHarmonyTurn } from "../tokenizer/harmony-completion.ts";
import { writeDeepSeekToolCalls } from "../tokenizer/deepseek-v31-calls.ts";
import { writeLlamaToolCalls } from "../tokenizer/llama3-json.ts";
import type { ModelChatFormat } from "../tokenizer/model-format.ts";
import { writeXmlToolCalls } from "../tokenizer/qwen3-coder.ts";
import { pyJson } from "../tokenizer/py-json.ts";
import { textPieces, TOKEN } from "../tokenizer/token-text.ts";

export interface Generation extends SampledText {
  /** Sampled ids: the text's tokens, then the stop token unless cut short. */
  ids: number[];
  pieces: string[];
  /** vLLM's `output.text`: the pieces joined, cut at a stop string. */
  text: string;
  /** The whole text the turn would produce, uncut. */
  fullText: string;
  finishReason: "stop" | "length";
  stopReason: number | string | null;
  toolCalls: ToolCallSpan[];
}

export interface GenerateOptions {
  maxTokens: number;
  /** The token that ends the turn: <|im_end|> for a chat, <|endoftext|> for a plain continuation. */
  stopToken: number;
  stop?: readonly string[];
  stopTokenIds?: readonly number[];
  includeStopStrInOutput?: boolean;
  /** The tool-call syntax the turn is written in (default hermes). */
  syntax?: ToolSyntax;
  /** The served chat format the turn is tokenized with (default Qwen3's). */
  format?: ModelChatFormat;
}

export interface FormattedTurn {
  text: string;
  toolCalls: ToolCallSpan[];
  /** The turn's own stop token where the family's turns end in more than one way (harmony's `<|call|>`, `<|return|>`). */
  stop?: { token: string; eos: boolean };
}

/**
 * `<think>\n{reasoning}\n</think>\n\n{content}` then `<tool_call>\n{...}\n</tool_call>` blocks, as Qwen3 writes them;
 * with the XML syntax the calls are written as Qwen3-Coder writes them (qwen3-coder.ts) and found by reading them.
 */
/** A turn's calls with their text in NFC, as its content is written. */
function nfcCalls(turn: SimTurn): Array<{ name: string; arguments: string | Record<string, unknown> }> {
  return turn.toolCalls.map((call) => ({
    name: call.name.normalize("NFC"),
    arguments: typeof call.arguments === "string" ? call.arguments.normalize("NFC") : call.arguments,
  }));
}

export function formatTurn(turn: SimTurn, syntax: ToolSyntax = HERMES): FormattedTurn {
  if (syntax.parser === "openai") {
    const written = writeHarmonyTurn({
      reasoning: turn.reasoning === null ? null : turn.reasoning.normalize("NFC"),
      content: turn.content.normalize("NFC"),
      calls: turn.toolCalls.map((call) => ({ name: call.name.normalize("NFC"), arguments: call.arguments })),
    });
    // <|return|> is the tokenizer's EOS (stop_reason null); <|call|> is a stop id of the request.
    return { text: written.text, toolCalls: [], stop: { token: written.stop, eos: written.stop === "<|return|>" } };
  }
  let text = "";
  if (turn.reasoning !== null) text += `<think>\n${turn.reasoning.normalize("NFC")}\n</think>\n\n`;
  const content = turn.content.normalize("NFC");
  if (syntax.parser === "deepseek_v31") {
    // V3.1 writes its text, then the calls chained in one block (deepseek-v31-calls.ts).
    const calls = nfcCalls(turn);
    text += writeDeepSeekToolCalls(content, calls);
    return { text, toolCalls: syntax.spans(text) };
  }
  if (syntax.parser === "llama3_json") {
    // Llama writes a call as its whole answer: text before it is neither parsed as content nor rendered back.
    if (turn.toolCalls.length === 0) return { text: text + content, toolCalls: [] };
    const calls = nfcCalls(turn);
    text += writeLlamaToolCalls(calls);
    return { text, toolCalls: syntax.spans(text) };
  }
  if (syntax.parser === "qwen3_coder") {
    const calls = nfcCalls(turn);
    text += writeXmlToolCalls(content, calls);
    return { text, toolCalls: syntax.spans(text) };
  }
  text += content;
  const toolCalls: ToolCallSpan[] = [];
  turn.toolCalls.forEach((call, i) => {
    if (i > 0 || content) text += "\n";
    const start = text.length;
    const name = call.name.normalize("NFC");
    text += `<tool_call>\n{"name": "${name}`;
    const nameEnd = text.length + 1;
    text += `", "arguments": `;
    const raw = (typeof call.arguments === "string" ? call.arguments : pyJson(call.arguments)).normalize("NFC");
    const argsStart = text.length;
    text += raw;
    const argsEnd = text.length;
    text += "}\n</tool_call>";
    toolCalls.push({ name, start, nameEnd, argsStart, argsEnd, arguments: hermesArguments(raw) });
  });
  return { text, toolCalls };
}

export function generate(turn: SimTurn, options: GenerateOptions): Generation {
  const formatted = formatTurn(turn, options.syntax);
  const format = options.format;
  const ownStop = formatted.stop && format && options.stopToken !== format.endOfText ? formatted.stop : undefined;
  const stopToken = ownStop ? format!.tokenId(ownStop.token)! : options.stopToken;
  let ids = [...encodeCached(formatted.text, format), stopToken];
  let pieces = format ? format.textPieces(ids) : textPieces(ids);
  let finishReason: Generation["finishReason"] = "stop";
  // The turn's own end is an EOS (stop_reason null); any other stop id is reported.
  const turnEnd = format ? format.turnEnd.id : TOKEN.imEnd;
  let stopReason: Generation["stopReason"] = (ownStop ? ownStop.eos : stopToken === turnEnd) ? null : stopToken;
  let cutText: number | undefined;

  // stop_token_ids end the turn at the first one sampled (it stays in the ids).
  if (options.stopTokenIds?.length) {
    const at = ids.findIndex((id, i) => i < ids.length - 1 && options.stopTokenIds!.includes(id));
    if (at >= 0) {
      ids = ids.slice(0, at + 1);
      pieces = pieces.slice(0, at + 1);
      stopReason = ids[at]!;
    }
  }
  // Stop strings: the first token whose text completes one ends the turn; the text is cut before the string.
  if (options.stop?.length) {
    let text = "";
    outer: for (let i = 0; i < ids.length; i++) {
      text += pieces[i]!;
      for (const stop of options.stop) {
        const at = stop ? text.indexOf(stop) : -1;
        if (at >= 0) {
          ids = ids.slice(0, i + 1);
          pieces = pieces.slice(0, i + 1);
          cutText = options.includeStopStrInOutput ? at + stop.length : at;
          stopReason = stop;
          break outer;
        }
      }
    }
  }
  if (ids.length > options.maxTokens) {
    ids = ids.slice(0, options.maxTokens);
    pieces = pieces.slice(0, options.maxTokens);
    finishReason = "length";
    stopReason = null;
    cutText = undefined;
  }
  if (cutText !== undefined) pieces = cutPieces(pieces, cutText);
  return {
    ids,
    pieces,
    text: pieces.join(""),
    fullText: formatted.text,
    finishReason,
    stopReason,
    toolCalls: formatted.toolCalls,
  };
}

function cutPieces(pieces: string[], length: number): string[] {
  let pos = 0;
  return pieces.map((piece) => {
    const keep = Math.max(0, Math.min(piece.length, length - pos));
    pos += piece.length;
    return piece.slice(0, keep);
  });
}
