// A token-mode call's upstream answer (/v1/completions) read by the relays as the chat completion it stands for: a
// whole body is converted at once, a stream event by event as it arrives. Errors and anything that is not a
// completion pass through as the upstream sent them.
import { SseParser } from "../sse-parser.ts";
import type { Json } from "../upstream/fields.ts";
import type { Sink, UpstreamAnswer, UpstreamHeaders } from "../upstream/upstream-call.ts";
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

/**
 * A completion choice's top alternatives (`logprobs.top_logprobs`: per token a {text: logprob} map, asked for by a
 * rollout that records entropies, gateway/branching/entropy.ts) as chat `top_logprobs` lists; null when it has none.
 */
function completionTops(choice: Json): Json[][] | null {
  const logprobs = choice["logprobs"];
  const tops = typeof logprobs === "object" && logprobs !== null ? (logprobs as Json)["top_logprobs"] : undefined;
  if (!Array.isArray(tops) || tops.length === 0) return null;
  return tops.map((top) =>
    typeof top === "object" && top !== null
      ? Object.entries(top as Record<string, unknown>).map(([token, logprob]) => ({ token, logprob, bytes: null }))
      : [],
  );
}

/** Puts each token's alternatives into the chat choice's logprob entries, in order; what is left stays queued. */
function addTops(choice: Json, queue: Json[][]): void {
  const logprobs = choice["logprobs"];
  const content = typeof logprobs === "object" && logprobs !== null ? (logprobs as Json)["content"] : undefined;
  if (!Array.isArray(content)) return;
  for (const entry of content) {
    const top = queue.shift();
    if (top && typeof entry === "object" && entry !== null) (entry as Json)["top_logprobs"] = top;
  }
}

export class CompletionAsChat implements UpstreamAnswer {
  readonly #upstream: UpstreamAnswer;
  readonly #settings: AnswerSettings;
  readonly #onAnswers: (answers: AnsweredChoice[]) => void;
  #answers: AnsweredChoice[] | null = null;
  /** Per choice, streamed tokens' alternatives waiting for their chat chunk (chunks go out one token behind). */
  readonly #tops = new Map<number, Json[][]>();

  #queue(index: number): Json[][] {
    let queue = this.#tops.get(index);
    if (!queue) this.#tops.set(index, (queue = []));
    return queue;
  }

  /** `onAnswers`: called once the answer is complete, before the relay commits the call. */
  constructor(
    upstream: UpstreamAnswer,
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
    const upstreamChoices = Array.isArray(completion["choices"]) ? (completion["choices"] as Json[]) : [];
    const chatChoices = Array.isArray(chat["choices"]) ? (chat["choices"] as Json[]) : [];
    upstreamChoices.forEach((raw, i) => {
      const tops = completionTops(raw);
      if (tops && chatChoices[i]) addTops(chatChoices[i]!, tops);
    });
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
        for (const raw of chunk["choices"] as unknown[]) {
          const tops = typeof raw === "object" && raw !== null ? completionTops(raw as Json) : null;
          const index = (raw as Json)["index"];
          if (tops) tops.forEach((top) => this.#queue(typeof index === "number" ? index : 0).push(top));
        }
        for (const chatChunk of chat.push(chunk)) {
          for (const choice of (chatChunk["choices"] as Json[] | undefined) ?? []) {
            const index = typeof choice["index"] === "number" ? choice["index"] : 0;
            if (this.#tops.has(index)) addTops(choice, this.#queue(index));
          }
          out.push(event(JSON.stringify(chatChunk)));
        }
      }
      return out.length === 0 ? true : sink(out.length === 1 ? out[0]! : Buffer.concat(out));
    });
  }
}
