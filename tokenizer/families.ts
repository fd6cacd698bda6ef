// The chat-format families rlgate renders and parses, each with its own markup: the special tokens that open and
// close a turn, the reasoning block, where a tool call opens, and the vLLM tool parser whose syntax it answers in.
// Everything that needs a special token (the sim, the gateway's token prompts, history repair, the trajectory's turn
// rules) reads it from a family here, never by value.
import type { ToolParserName } from "./output-parser.ts";
import { writesXmlToolCalls } from "./qwen3-coder.ts";
import type { TurnMarks } from "./turn-marks.ts";

export interface FamilyMarkup {
  /** Opens the model's turn, the generation prompt's (`<|im_start|>`, `<|start_header_id|>`, `<｜Assistant｜>`). */
  readonly turnStart: string;
  /** Closes a turn the model samples (`<|im_end|>`, `<|eot_id|>`, `<｜end▁of▁sentence｜>`). */
  readonly turnEnd: string;
  /** What the template writes before a role's content. */
  header(role: string): string;
  /** What a prompt that opens with a system turn starts with (the BOS token included where the template writes it). */
  readonly systemStart: string;
  /** The reasoning block (`<think>`…`</think>`) and the empty one a generation prompt ends with when thinking is off. */
  readonly think: { readonly open: string; readonly close: string; readonly empty: string } | null;
  /** The token a completion's tool call opens with (`<tool_call>`, `<|python_tag|>`); null when there is none. */
  readonly toolCallOpen: string | null;
  /** The token that ends plain text (not a chat turn): a generation-config stop id. */
  readonly endOfText: string;
  /** The BOS token the template writes (`bos_token`); "" when it writes none. */
  readonly bos: string;
  /**
   * Other tokens that close an assistant turn the model samples (harmony's `<|call|>` after a tool call and
   * `<|return|>` after the final answer); a turn ended by one of them is closed already.
   */
  readonly alsoEnds?: readonly string[];
  /**
   * The header of a turn right after the system turn that still belongs to the system prompt: harmony's developer
   * message (`<|start|>developer`), where the harness's system prompt and tools go.
   */
  readonly instructionsStart?: string;
  /** How every turn opens and closes, where that is more than `turnStart` … `turnEnd` (turn-marks.ts). */
  readonly turns?: TurnMarks;
}

/** A chat-format family rlgate renders and parses, and the vLLM tool parser it answers like. */
export interface ChatFamily {
  readonly name: string;
  /** The `--family` / directory name of the harness matrix and tests. */
  readonly id: string;
  readonly toolParser: ToolParserName;
  /** Whether vLLM serves it with a reasoning parser (qwen3: `<think>` blocks are reasoning_content). */
  readonly reasons: boolean;
  readonly markup: FamilyMarkup;
}

const CHATML: FamilyMarkup = {
  turnStart: "<|im_start|>",
  turnEnd: "<|im_end|>",
  header: (role) => `<|im_start|>${role}\n`,
  systemStart: "<|im_start|>system",
  think: { open: "<think>", close: "</think>", empty: "<think>\n\n</think>\n\n" },
  toolCallOpen: "<tool_call>",
  endOfText: "<|endoftext|>",
  bos: "",
};

const LLAMA3: FamilyMarkup = {
  turnStart: "<|start_header_id|>",
  turnEnd: "<|eot_id|>",
  header: (role) => `<|start_header_id|>${role}<|end_header_id|>\n\n`,
  // Llama 3's template always writes a system turn, right after <|begin_of_text|>.
  systemStart: "<|begin_of_text|><|start_header_id|>system",
  think: null,
  // vLLM's llama3_json parser's bot_token; a special token, so it is not in the output text.
  toolCallOpen: "<|python_tag|>",
  endOfText: "<|end_of_text|>",
  bos: "<|begin_of_text|>",
};

// gpt-oss's harmony format: every message is `<|start|>{header}<|message|>{content}<|end|>`, the generation prompt
// `<|start|>assistant`; reasoning is the analysis channel, not a block of markup (harmony-parse.ts reads channels).
const HARMONY: FamilyMarkup = {
  turnStart: "<|start|>",
  turnEnd: "<|end|>",
  header: (role) => `<|start|>${role}`,
  systemStart: "<|start|>system",
  think: null,
  toolCallOpen: null,
  endOfText: "<|endoftext|>",
  bos: "",
  alsoEnds: ["<|call|>", "<|return|>"],
  instructionsStart: "<|start|>developer",
};

// DeepSeek V3.1 (vLLM's tool_chat_template_deepseekv31.jinja): `<｜begin▁of▁sentence｜>` and the system prompt, then
// `<｜User｜>text`, `<｜Assistant｜></think>answer<｜end▁of▁sentence｜>` (`<think>` when thinking), tool results as
// `<｜tool▁output▁begin｜>…<｜tool▁output▁end｜>` with the model's turn right after them. The template's indentation
// writes spaces around its markers (two before the generation prompt's `<｜Assistant｜>`, four before its `</think>`).
const DEEPSEEK_V31: FamilyMarkup = {
  turnStart: "<｜Assistant｜>",
  turnEnd: "<｜end▁of▁sentence｜>",
  header: (role) => (role === "user" ? "<｜User｜>" : role === "tool" ? "<｜tool▁output▁begin｜>" : "<｜Assistant｜>"),
  // The template's first lines leave two newlines before the BOS token it writes.
  systemStart: "\n\n<｜begin▁of▁sentence｜>",
  // vLLM's template writes the generation prompt's `</think>` four spaces after its `<｜Assistant｜>`.
  think: { open: "<think>", close: "</think>", empty: "    </think>" },
  toolCallOpen: "<｜tool▁calls▁begin｜>",
  endOfText: "<｜end▁of▁sentence｜>",
  bos: "<｜begin▁of▁sentence｜>",
  turns: {
    starts: ["<｜User｜>", "<｜Assistant｜>", "<｜tool▁output▁begin｜>"],
    ends: ["<｜end▁of▁sentence｜>", "<｜tool▁output▁end｜>"],
    roleAfterStart: false,
    modelTurnAfter: ["<｜tool▁output▁end｜>"],
  },
};

export const FAMILIES = {
  qwen3: { name: "Qwen3 (hermes tool calls)", id: "qwen3", toolParser: "hermes", reasons: true, markup: CHATML },
  qwen3Coder: {
    name: "Qwen3-Coder / Qwen3.5 (XML tool calls)",
    id: "qwen3-coder",
    toolParser: "qwen3_coder",
    reasons: true,
    markup: CHATML,
  },
  llama3: {
    name: "Llama 3.x (llama3_json tool calls)",
    id: "llama3",
    toolParser: "llama3_json",
    reasons: false,
    markup: LLAMA3,
  },
  deepseekV31: {
    name: "DeepSeek V3.1 (deepseek_v31 tool calls)",
    id: "deepseek-v3.1",
    toolParser: "deepseek_v31",
    // Served with --reasoning-parser deepseek_v3, which splits reasoning only when the request turns thinking on
    // (chat_template_kwargs.thinking); rlgate serves and simulates V3.1 in its default, non-thinking mode.
    reasons: false,
    markup: DEEPSEEK_V31,
  },
  gptoss: {
    name: "gpt-oss (harmony)",
    id: "gpt-oss",
    toolParser: "openai",
    reasons: true,
    markup: HARMONY,
  },
} as const satisfies Record<string, ChatFamily>;

/** The family that answers in a vLLM tool parser's syntax. */
export function familyOfParser(parser: ToolParserName): ChatFamily {
  const family = Object.values(FAMILIES).find((f) => f.toolParser === parser);
  if (!family) throw new Error(`no chat family answers with the ${parser} tool parser`);
  return family;
}

/** Families known by name whose formats are not built: a template of theirs is refused, saying so. */
const NOT_BUILT: Array<{ name: string; marks: string[] }> = [
  // V3's and R1's templates write `type<｜tool▁sep｜>name` and a fenced JSON block; V3.1's the name and raw JSON.
  { name: "DeepSeek V3 / R1", marks: ["<｜tool▁calls▁begin｜>", "<｜Assistant｜>"] },
];

/** Thrown when a model directory cannot serve as the chat format; the message says what is missing. */
export class ModelFormatError extends Error {
  readonly code = "RLGATE_MODEL_FORMAT";
}

/**
 * The family a chat template belongs to, from its turn markers and how it writes tool calls: `<function=…>` with
 * `<parameter=…>` is Qwen3-Coder's XML; a ChatML template with `<tool_call>` blocks (or none at all) is Qwen3's
 * hermes; `<|start_header_id|>` … `<|eot_id|>` turns are Llama 3's; `<|channel|>` and `<|call|>` are harmony's
 * (gpt-oss, which vLLM renders with openai_harmony whatever the template says); `<｜Assistant｜></think>` before
 * tool calls is DeepSeek V3.1's.
 */
export function familyOfTemplate(template: string, source: string): ChatFamily {
  if (writesXmlToolCalls(template)) return FAMILIES.qwen3Coder;
  const has = (markup: FamilyMarkup) => template.includes(markup.turnStart) && template.includes(markup.turnEnd);
  if (has(CHATML) && !template.includes("<function=")) return FAMILIES.qwen3;
  if (has(LLAMA3)) return FAMILIES.llama3;
  if (template.includes("<|channel|>") && template.includes("<|call|>")) return FAMILIES.gptoss;
  if (template.includes("<｜Assistant｜></think>") && template.includes("<｜tool▁call▁begin｜>"))
    return FAMILIES.deepseekV31;
  const known = NOT_BUILT.find((f) => f.marks.some((mark) => template.includes(mark)));
  throw new ModelFormatError(
    `${source}: the chat template is ${known ? `${known.name}'s, a family rlgate does not render yet` : "of no family rlgate knows"} (built in: ${Object.values(
      FAMILIES,
    )
      .map((f) => f.name)
      .join(", ")}; not yet: ${NOT_BUILT.map((f) => f.name).join(", ")})`,
  );
}
