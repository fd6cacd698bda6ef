// A token-mode call's upstream answer (/v1/completions) read by the relays as the chat completion it stands for: a
// whole body is converted at once, a stream event by event as it arrives. Errors and anything that is not a
// completion pass through as the upstream sent them.
import { SseParser } from "../sse-parser.ts";
import type { Json } from "../upstream/fields.ts";
import type { Sink, UpstreamAnswer, UpstreamCall, UpstreamHeaders } from "../upstream/upstream-call.ts";
import {
  ChatChunkStream,
  chatFromCompletion,
  isCompletion,
  type AnswerSettings,
  type AnsweredChoice,
} from "./answer.ts";

function parseObject(text: string): Json | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : null;
  } catch {
    return null;
  }
}

const event = (data: string): Buffer => Buffer.from(`data: ${data}\n\n`);

export class CompletionAsChat implements UpstreamAnswer {
  readonly #upstream: UpstreamCall;
  readonly #settings: AnswerSettings;
  readonly #onAnswers: (answers: AnsweredChoice[]) => void;
  #answers: AnsweredChoice[] | null = null;

  /** `onAnswers`: called once the answer is complete, before the relay commits the call. */
  constructor(
    upstream: UpstreamCall,
    settings: AnswerSettings,
    onAnswers: (answers: AnsweredChoice[]) => void = () => {},
  ) {
    this.#upstream = upstream;
    this.#settings = settings;
    this.#onAnswers = onAnswers;
  }

  get statusCode(): number {
    return this.#upstream.statusCode;
  }

  get headers(): UpstreamHeaders {
    return this.#upstream.headers;
  }

  /** Each choice's answer as the harness received it; null until the answer was complete. */
  get answers(): AnsweredChoice[] | null {
    return this.#answers;
  }

  resume(): void {
    this.#upstream.resume();
  }

  abort(): void {
    this.#upstream.abort();
  }

  async readAll(): Promise<Buffer> {
    const raw = await this.#upstream.readAll();
    if (this.statusCode !== 200) return raw;
    const completion = parseObject(raw.toString("utf8"));
    if (!completion || !isCompletion(completion)) return raw;
    const { chat, answers } = chatFromCompletion(completion, this.#settings);
    this.#answers = answers;
    this.#onAnswers(answers);
    return Buffer.from(JSON.stringify(chat));
  }

  pump(sink: Sink): Promise<void> {
    if (this.statusCode !== 200) return this.#upstream.pump(sink);
    const parser = new SseParser();
    const chat = new ChatChunkStream(this.#settings);
    return this.#upstream.pump((bytes) => {
      const out: Buffer[] = [];
      for (const ev of parser.push(bytes)) {
        if (ev.data === null) continue;
        if (ev.data.trim() === "[DONE]") {
          if (chat.complete && this.#answers === null) {
            this.#answers = chat.answers();
            this.#onAnswers(this.#answers);
          }
          out.push(ev.raw);
          continue;
        }
        const chunk = parseObject(ev.data);
        // Not a completion chunk (an error event): passed on for the relay to record as the upstream's error.
        if (!chunk || !Array.isArray(chunk["choices"])) {
          out.push(ev.raw);
          continue;
        }
        for (const chatChunk of chat.push(chunk)) out.push(event(JSON.stringify(chatChunk)));
      }
      return out.length === 0 ? true : sink(out.length === 1 ? out[0]! : Buffer.concat(out));
    });
  }
}
