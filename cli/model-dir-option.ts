// `--model-dir DIR` of the commands that read a store after the fact (show, export): the served model's chat format,
// so its ids decode with its tokenizer and its turns are delimited with its ids, as the gateway that recorded them did.
import { resolve } from "node:path";
import type { ModelChatFormat } from "../tokenizer/model-format.ts";
import type { ChatFormat } from "../trajectory/chat-format.ts";

export const MODEL_DIR_HELP =
  "the served model's Hugging Face files, as given to rlgate serve / run: its chat format (tokenizer, turn ids) is used to rebuild the trajectories (default: Qwen3, built in)";

/** A model directory's chat format: its tokenizer for the text, its turn ids for the reconstruction. */
export async function modelOf(dir: string): Promise<{ format: ModelChatFormat; chatFormat: ChatFormat }> {
  const { loadModelChatFormat } = await import("../tokenizer/model-format.ts");
  const { chatFormatOf } = await import("../trajectory/chat-format.ts");
  const format = loadModelChatFormat(resolve(dir));
  return { format, chatFormat: chatFormatOf(format) };
}
