// What a policy knows about a request, and the one reader that fills it turn by turn: chat messages and each
// family's rendered prompt feed it the same events, so every family agrees on what opened a thread.

export interface ToolSpec {
  name: string;
  parameters: unknown;
}

export type ToolChoice = "auto" | "none" | "required" | { name: string };

export interface ConversationView {
  /** Assistant messages already in the history: the index of the turn being generated. */
  assistantTurns: number;
  tools: ToolSpec[];
  toolChoice: ToolChoice;
  /** Tool results that came after the last user message, oldest first. */
  toolResults: string[];
  /**
   * Every tool result of the conversation, the latest one's text: a harness that ends each request with a user message
   * of its own (OpenClaw's internal context) has no tool result after its last user message, however many it ran.
   */
  allToolResults: number;
  lastToolResult: string | undefined;
  lastUserText: string;
  /**
   * The user messages before the first tool result: what a thread (the main agent, a sub-agent) started with — after
   * any reply the harness wrote itself (Qwen Code's canned answer to its startup context).
   */
  openingUserText: string;
  /** Whether the model opens a `<think>` block (Qwen3's enable_thinking). */
  thinking: boolean;
  /** False for a raw completion prompt that is not a rendered chat: the model just continues the text. */
  chatShaped: boolean;
}

/** Builds a chat-shaped view from a conversation's turns, oldest first. */
export class ConversationReader {
  readonly view: ConversationView;
  #toolSeen = false;

  constructor(thinking: boolean) {
    this.view = {
      assistantTurns: 0,
      tools: [],
      toolChoice: "auto",
      toolResults: [],
      allToolResults: 0,
      lastToolResult: undefined,
      lastUserText: "",
      openingUserText: "",
      thinking,
      chatShaped: true,
    };
  }

  user(text: string): void {
    if (!this.#toolSeen) this.view.openingUserText += (this.view.openingUserText ? "\n" : "") + text;
    this.view.lastUserText = text;
    this.view.toolResults = [];
  }

  assistant(): void {
    this.view.assistantTurns++;
  }

  toolResult(text: string): void {
    this.#toolSeen = true;
    this.view.toolResults.push(text);
    this.view.allToolResults++;
    this.view.lastToolResult = text;
  }
}
