// An answer the upstream aborted for a weight update (an abort-mode pause: vLLM and SGLang end each running request
// with finish_reason "abort"), continued after the resume from exactly where it stopped: the same prompt ids plus the
// ids already sampled, with what is left of max_tokens. The harness reads one uninterrupted stream: the abort event,
// its [DONE] and usage are dropped, the continuation's chunks carry the first request's id and no prompt ids again,
// and the last usage counts the whole answer. Only streamed completions whose prompt is token ids are continued (the
// tokens prompt mode sends every chat call so); a chat request has no exact continuation (docs/gateway.md).
import { SseParser } from "../sse-parser.ts";
import type { Json } from "../upstream/fields.ts";
import { UpstreamCall, type Sink, type UpstreamAnswer, type UpstreamHeaders } from "../upstream/upstream-call.ts";
import type { PolicyGate } from "./gate.ts";
import type { PolicyMetrics } from "./metrics.ts";
import type { PolicyUpdateRecord } from "../../store/records.ts";

/** More aborts than this in one call fail it: an upstream that aborts every request is broken, not updating. */
export const MAX_CONTINUATIONS = 100;

export interface ContinuationSettings {
  /** The completions body sent first (prompt ids, stream: true). */
  body: Json;
  /** Sends `body` upstream through `call` (the call's replica, its headers); resolves once the head arrived. */
  reopen: (body: string, call: UpstreamCall) => Promise<UpstreamCall>;
  policy: PolicyGate;
  metrics: PolicyMetrics;
  /** What the call's record keeps of the update (filled in here). */
  record: PolicyUpdateRecord;
  /** The policy version the call was sent under (its first tokens' version). */
  version: string | null;
}

/** Whether a completions body is one this module can continue: a stream of one choice from a token-id prompt. */
export function continuable(path: string, body: Json): boolean {
  const prompt = body["prompt"];
  const n = body["n"];
  return (
    path === "/v1/completions" &&
    body["stream"] === true &&
    Array.isArray(prompt) &&
    prompt.length > 0 &&
    typeof prompt[0] === "number" &&
    (n === undefined || n === null || n === 1) &&
    typeof body["max_tokens"] === "number"
  );
}

function parseObject(text: string): Json | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : null;
  } catch {
    return null;
  }
}

const event = (data: string): Buffer => Buffer.from(`data: ${data}\n\n`);

export class ContinuedCompletion implements UpstreamAnswer {
  readonly #first: UpstreamCall;
  readonly #settings: ContinuationSettings;
  #current: UpstreamCall;
  #aborted = false;

  constructor(first: UpstreamCall, settings: ContinuationSettings) {
    this.#first = first;
    this.#current = first;
    this.#settings = settings;
  }

  get statusCode(): number {
    return this.#first.statusCode;
  }

  get headers(): UpstreamHeaders {
    return this.#first.headers;
  }

  readAll(): Promise<Buffer> {
    return this.#first.readAll();
  }

  resume(): void {
    this.#current.resume();
  }

  abort(): void {
    this.#aborted = true;
    this.#current.abort();
  }

  async pump(sink: Sink): Promise<void> {
    if (this.statusCode !== 200) return this.#first.pump(sink);
    const { body, policy, record } = this.#settings;
    const promptIds = body["prompt"] as number[];
    const maxTokens = body["max_tokens"] as number;
    const sampled: number[] = [];
    let firstId: unknown = undefined;
    const unread: string[] = [];
    let call = this.#first;
    for (let segment = 0; ; segment++) {
      let interrupted = false;
      const parser = new SseParser();
      const rewrite = segment > 0;
      await call.pump((bytes) => {
        const out: Buffer[] = [];
        for (const ev of parser.push(bytes)) {
          if (ev.data === null || ev.data.trim() === "[DONE]") {
            if (!interrupted) out.push(ev.raw);
            continue;
          }
          // Until an abort, the first request's events pass as they came, unparsed (the relay parses them anyway):
          // their ids are read only if an abort comes, from the events kept here.
          if (!rewrite && !interrupted && !ev.data.includes('"abort"')) {
            unread.push(ev.data);
            out.push(ev.raw);
            continue;
          }
          if (unread.length) {
            for (const data of unread) {
              const earlier = parseObject(data);
              firstId ??= earlier?.["id"];
              const ids = (earlier?.["choices"] as Json[] | undefined)?.[0]?.["token_ids"];
              if (Array.isArray(ids)) for (const id of ids) sampled.push(id as number);
            }
            unread.length = 0;
          }
          const chunk = parseObject(ev.data);
          const choices = chunk?.["choices"];
          if (!chunk || !Array.isArray(choices)) {
            if (!interrupted) out.push(ev.raw); // an error event: the relay records it
            continue;
          }
          firstId ??= chunk["id"];
          const choice = choices[0] as Json | undefined;
          if (choice === undefined) {
            // The usage chunk: dropped after an abort (the continuation's counts the whole answer).
            if (interrupted) continue;
            if (!rewrite) out.push(ev.raw);
            else out.push(event(JSON.stringify(withUsage(chunk, firstId, promptIds.length, sampled.length))));
            continue;
          }
          const ids = choice["token_ids"];
          if (Array.isArray(ids)) for (const id of ids) sampled.push(id as number);
          if (choice["finish_reason"] === "abort") {
            interrupted = true;
            // Tokens the abort chunk still carries go on; its finish does not. An abort before the first token is
            // the first request's only event and holds the prompt ids, which the harness (and the record) reads once.
            const carriesPromptIds = !rewrite && choice["prompt_token_ids"] !== undefined;
            if (!(Array.isArray(ids) && ids.length > 0) && !choice["text"] && !carriesPromptIds) continue;
            choice["finish_reason"] = null;
            out.push(event(JSON.stringify(rewrite ? continuationChunk(chunk, firstId) : chunk)));
            continue;
          }
          out.push(rewrite ? event(JSON.stringify(continuationChunk(chunk, firstId))) : ev.raw);
        }
        if (out.length === 0) return true;
        return sink(out.length === 1 ? out[0]! : Buffer.concat(out));
      });
      if (!interrupted || this.#aborted) return;
      if (segment + 1 > MAX_CONTINUATIONS)
        throw new Error(`the upstream aborted the answer ${segment + 1} times: not continued again`);
      // The update: the answer goes on once the upstreams run again (at once when nobody paused them).
      await policy.hold(false);
      if (this.#aborted) return;
      const left = maxTokens - sampled.length;
      record.continued = (record.continued ?? 0) + 1;
      this.#settings.metrics.continued.inc();
      if (left <= 0) {
        // The abort fell on the last token max_tokens allowed: the answer ends as it would have, at its length.
        const last = {
          id: firstId,
          object: "text_completion",
          choices: [{ index: 0, text: "", finish_reason: "length" }],
        };
        sink(Buffer.concat([event(JSON.stringify(last)), event("[DONE]")]));
        return;
      }
      if (!record.versions?.length) record.versions = [{ start: 0, version: this.#settings.version }];
      noteVersion(record, sampled.length, policy.version);
      const next = new UpstreamCall();
      this.#current = next;
      call = await this.#settings.reopen(
        JSON.stringify({ ...body, prompt: [...promptIds, ...sampled], max_tokens: left }),
        next,
      );
      if (call.statusCode !== 200) {
        const text = (await call.readAll().catch(() => Buffer.alloc(0))).toString("utf8").slice(0, 300);
        throw new Error(`continuing the answer after a weight update: upstream HTTP ${call.statusCode} ${text}`);
      }
    }
  }
}

/** A continuation's chunk as part of the first answer: its id, no prompt ids (the harness had them once). */
function continuationChunk(chunk: Json, firstId: unknown): Json {
  const choices = (chunk["choices"] as Json[]).map((choice) => {
    const { prompt_token_ids: _prompt, ...rest } = choice;
    return rest;
  });
  return { ...chunk, id: firstId, choices };
}

function withUsage(chunk: Json, firstId: unknown, promptTokens: number, completionTokens: number): Json {
  const usage = chunk["usage"];
  const counted =
    typeof usage === "object" && usage !== null
      ? {
          ...(usage as Json),
          prompt_tokens: promptTokens,
          completion_tokens: completionTokens,
          total_tokens: promptTokens + completionTokens,
        }
      : usage;
  return { ...chunk, id: firstId, usage: counted };
}

/** Records that tokens from `start` on were sampled by `version` (runs: one entry per change). */
function noteVersion(record: PolicyUpdateRecord, start: number, version: string | null): void {
  const runs = (record.versions ??= []);
  const last = runs[runs.length - 1];
  if (last && last.version === version) return;
  runs.push({ start, version });
}
