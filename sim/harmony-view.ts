// A gpt-oss prompt (harmony, as harmony-render.ts writes it) read back into what a policy needs: the functions the
// developer message declares, the user's words, the tool results since, and how many assistant turns came before.
import { HARMONY_TOKENS as T } from "../tokenizer/harmony-render.ts";
import { ConversationReader, type ConversationView, type ToolSpec } from "./conversation-view.ts";

// `type NAME = (_: {` … `}) => any;` or `type NAME = () => any;` in the functions namespace.
const DECLARATION = /^type (\w+) = (?:\(\) => any;|\(_: (?:\/\/[^\n]*\n)?\{\n([\s\S]*?)\n\}\) => any;)$/gm;
const FIELD = /^(\w+)(\?)?: ([^,\n]*),/;

function fieldType(type: string): Record<string, unknown> {
  if (type.endsWith("[]")) return { type: "array" };
  if (type.startsWith('"')) return { type: "string", enum: [...type.matchAll(/"([^"]*)"/g)].map((m) => m[1]) };
  return ["string", "number", "boolean"].includes(type) ? { type } : {};
}

function declaredTools(developer: string): ToolSpec[] {
  return [...developer.matchAll(DECLARATION)].map(([, name, body]) => {
    const properties: Record<string, unknown> = {};
    const required: string[] = [];
    for (const line of (body ?? "").split("\n")) {
      const field = FIELD.exec(line);
      if (!field) continue;
      properties[field[1]!] = fieldType(field[3]!.trim());
      if (!field[2]) required.push(field[1]!);
    }
    return { name: name!, parameters: { type: "object", properties, required } };
  });
}

/** The view of a harmony prompt ending with the generation prompt `<|start|>assistant`; null when it is not one. */
export function viewFromHarmonyPrompt(prompt: string): ConversationView | null {
  const generation = `${T.start}assistant`;
  if (!prompt.endsWith(generation)) return null;
  const reader = new ConversationReader(true);
  let previous = "";
  for (const message of prompt.slice(0, -generation.length).split(T.start).slice(1)) {
    const at = message.indexOf(T.message);
    if (at < 0) continue;
    const header = message.slice(0, at);
    const body = message.slice(at + T.message.length).replace(/<\|(?:end|call|return)\|>$/, "");
    const author = header.split(/[\s<]/)[0]!;
    if (author === "developer") reader.view.tools = declaredTools(body);
    else if (author === "user") reader.user(body);
    else if (author === "assistant") {
      // A chat turn is several harmony messages (analysis, commentary, a call): one turn until another author speaks.
      if (previous !== "assistant") reader.assistant();
    } else if (author.startsWith("functions.")) reader.toolResult(body);
    previous = author;
  }
  return reader.view;
}
