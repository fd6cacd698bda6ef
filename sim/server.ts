// The sim's HTTP core: routing through the selected flavour, fault injection, simulated latency, and counters a test
// can read (`stats`, `requests`, `events`). Responses are computed whole, then written with the configured timing.
import type { ReasoningField } from "../tokenizer/reasoning-field.ts";
import { EventEmitter, once } from "node:events";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { renderChatIds } from "../tokenizer/chat-template.ts";
import { qwen3CoderTemplate } from "../tokenizer/qwen3-coder.ts";
import type { ToolParserName } from "../tokenizer/output-parser.ts";
import { selectFlavor, type FlavorName, type SimContext } from "./flavor.ts";
import { mix, seededRandom } from "./hash.ts";
import { checkMoe, type MoeOptions } from "./moe.ts";
import { SimHttpError, type Reply, type StreamReply } from "./reply.ts";
import { pyJson } from "../tokenizer/py-json.ts";
import type { ScriptTurn } from "./script.ts";
import { PrefixCache, type PrefixCacheFigures } from "./prefix-cache.ts";
import { listen } from "../util/listen.ts";
import { SimWeights, abortChunk, abortedWhole, type StreamGate } from "./weights/state.ts";
import { weightsRoute } from "./weights/routes.ts";

export interface SimOptions {
  host?: string;
  port?: number;
  model?: string;
  seed?: number;
  script?: ScriptTurn[];
  ttftMs?: number;
  interTokenMs?: number;
  errorRate?: number;
  resetRate?: number;
  logprobNoise?: number;
  /** Context length reported by /v1/models and enforced on requests (Qwen3-8B: 40960). */
  maxModelLen?: number;
  flavor?: FlavorName;
  /** A jinja chat template replacing Qwen3's: prompts render differently (a server with a changed template). */
  chatTemplate?: string;
  /**
   * vLLM's `--tool-call-parser` (default hermes). `qwen3_coder` answers as Qwen3-Coder: XML tool calls, no thinking
   * unless the template has think markup, and Qwen3-Coder's chat template unless `chatTemplate` is given.
   */
  toolCallParser?: ToolParserName;
  /**
   * The prefix-cache model (prefix-cache.ts): microseconds of prefill per prompt token this sim has not cached, added
   * to the time to first token. Prefills are one engine's work: a request's prefill waits for those before it, so
   * uncached tokens also cost throughput. 0 or unset: off, every prompt costs the same.
   */
  prefillUsPerToken?: number;
  /** The model's KV cache in tokens (default 1,048,576): how much prefix it keeps before evicting. */
  prefixCacheTokens?: number;
  /**
   * A mixture-of-experts model (`rlgate sim --moe-layers L --moe-top-k K --moe-experts E`): vLLM answers carry
   * `choices[].routed_experts` (as vLLM with --enable-return-routed-experts), SGLang answers `sglext.routed_experts`
   * when asked (`return_routed_experts`, `routed_experts_start_len`). Experts are deterministic (sim/moe.ts).
   */
  moe?: MoeOptions;
  /** The vLLM version answered as: where reasoning goes (tokenizer/reasoning-field.ts; default `reasoning`, >= 0.17). */
  reasoningField?: ReasoningField;
}

export interface SimStats {
  requests: number;
  /** Responses written to the end. */
  completed: number;
  /** Requests whose client went away before the response was complete. */
  aborted: number;
  /** 5xx responses (injected or not). */
  errors: number;
  /** Connections the sim destroyed on purpose (reset fault or resetRate). */
  resets: number;
  inFlight: number;
}

export type SimOutcome = "pending" | "ok" | "error" | "reset" | "aborted";

export interface SimRequestRecord {
  seq: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body (undefined when there was none, it was not JSON, or it was over 1 MiB). */
  body: unknown;
  bodyBytes: number;
  status?: number;
  outcome: SimOutcome;
}

export interface SimServer {
  url: string;
  port: number;
  close(): Promise<void>;
  readonly stats: Readonly<SimStats>;
  /** The latest requests (at most 1000), oldest first. */
  readonly requests: readonly SimRequestRecord[];
  /** Emits "request" when one arrives, "response" when one completes, "aborted" when a client goes away (a record each). */
  readonly events: EventEmitter;
  /** Prompt tokens read from the prefix cache and prefilled; null when the model is off (`prefillUsPerToken`). */
  readonly prefixCache: Readonly<PrefixCacheFigures> | null;
  /** The policy version, pauses and the log of updates (sim/weights). */
  readonly weights: SimWeights;
}

const DEFAULT_MODEL = "Qwen/Qwen3-8B";
const DEFAULT_MAX_MODEL_LEN = 40960;
const MAX_RECORDS = 1000;
const DEFAULT_PREFIX_CACHE_TOKENS = 1 << 20;
/** Larger bodies are not kept in `requests` (gateway tests send bodies of 100 MB). */
const MAX_RECORDED_BODY = 1 << 20;
/** A reset stream is cut after this many engine steps (the role chunk and the first tokens). */
const RESET_AFTER_STEPS = 2;

type Fault = "error" | "reset" | "hang" | "stall" | "stream-error" | undefined;

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function rate(value: number | undefined, name: string): number {
  const r = value ?? 0;
  if (!(r >= 0 && r <= 1)) throw new RangeError(`${name} must be within [0, 1], got ${value}`);
  return r;
}

export async function startSim(options: SimOptions = {}): Promise<SimServer> {
  const flavor = selectFlavor(options.flavor);
  const seed = options.seed ?? 0;
  const ctx: SimContext = {
    model: options.model ?? DEFAULT_MODEL,
    seed,
    script: options.script,
    logprobNoise: options.logprobNoise ?? 0,
    maxModelLen: options.maxModelLen ?? DEFAULT_MAX_MODEL_LEN,
    chatTemplate: options.chatTemplate ?? (options.toolCallParser === "qwen3_coder" ? qwen3CoderTemplate() : undefined),
    ...(options.toolCallParser ? { toolParser: options.toolCallParser } : {}),
    ...(options.reasoningField ? { reasoningField: options.reasoningField } : {}),
    ...(options.moe ? { moe: checkMoe(options.moe) } : {}),
  };
  const timing = { ttftMs: options.ttftMs ?? 0, interTokenMs: options.interTokenMs ?? 0 };
  const errorRate = rate(options.errorRate, "errorRate");
  const resetRate = rate(options.resetRate, "resetRate");
  const draw = seededRandom(mix(seed, 0xfa17));
  const prefillUsPerToken = options.prefillUsPerToken ?? 0;
  if (!(prefillUsPerToken >= 0)) throw new RangeError(`prefillUsPerToken must be >= 0, got ${prefillUsPerToken}`);
  const prefixCache =
    prefillUsPerToken > 0 ? new PrefixCache(options.prefixCacheTokens ?? DEFAULT_PREFIX_CACHE_TOKENS) : null;
  // The engine prefills one request after another (as a step's token budget is shared): prefills queue here.
  let prefillBusyUntil = 0;
  /** How long until a generation's first token: the prefill of its prompts' uncached tokens, after those queued. */
  const prefillMs = (reply: Reply): number => {
    if (!prefixCache || !reply.prompts) return 0;
    let tokens = 0;
    for (const prompt of reply.prompts) tokens += prefixCache.admit(prompt);
    const now = performance.now();
    prefillBusyUntil = Math.max(now, prefillBusyUntil) + (tokens * prefillUsPerToken) / 1000;
    return prefillBusyUntil - now;
  };

  // Load the tokenizer and compile the template now, so the first request is as fast as the rest.
  renderChatIds([{ role: "user", content: "warm up" }]);

  const weights = new SimWeights(seed);
  const stats: SimStats = { requests: 0, completed: 0, aborted: 0, errors: 0, resets: 0, inFlight: 0 };
  const records: SimRequestRecord[] = [];
  const events = new EventEmitter();
  let seq = 0;

  const server = createServer((req, res) => {
    const record: SimRequestRecord = {
      seq: ++seq,
      method: req.method ?? "GET",
      path: new URL(req.url ?? "/", "http://sim").pathname,
      headers: req.headers,
      body: undefined,
      bodyBytes: 0,
      outcome: "pending",
    };
    records.push(record);
    if (records.length > MAX_RECORDS) records.shift();
    stats.requests++;
    stats.inFlight++;
    events.emit("request", record);
    res.on("close", () => {
      stats.inFlight--;
      if (record.outcome === "reset") return;
      if (res.writableFinished) {
        stats.completed++;
        if (record.outcome === "pending") record.outcome = "ok";
        events.emit("response", record);
      } else {
        stats.aborted++;
        record.outcome = "aborted";
        events.emit("aborted", record);
      }
    });
    handle(req, res, record).catch((error: unknown) => {
      if (!res.headersSent && !res.destroyed) {
        sendError(res, record, new SimHttpError(500, `rlgate sim: ${(error as Error).message}`, { cause: error }));
      } else {
        res.destroy();
      }
    });
  });

  function sendJson(res: ServerResponse, record: SimRequestRecord, status: number, body: unknown): void {
    record.status = status;
    if (status >= 500) {
      stats.errors++;
      record.outcome = "error";
    }
    if (body === undefined) {
      res.writeHead(status, { "content-length": 0 }).end();
      return;
    }
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text);
  }

  function sendError(res: ServerResponse, record: SimRequestRecord, error: SimHttpError): void {
    sendJson(res, record, error.status, flavor.errorBody(error));
  }

  /**
   * What vLLM (>= 0.10.1) sends when generation fails once a stream has started: the error as one more event (the
   * body of its HTTP error, `create_streaming_error_response`), then `[DONE]`, on a stream whose status was 200.
   */
  function streamError(res: ServerResponse, record: SimRequestRecord): void {
    record.outcome = "error";
    stats.errors++;
    const error = new SimHttpError(400, "rlgate sim: injected mid-stream error");
    res.end(`data: ${pyJson(flavor.errorBody(error))}\n\ndata: [DONE]\n\n`);
  }

  function reset(res: ServerResponse, record: SimRequestRecord): void {
    record.outcome = "reset";
    stats.resets++;
    res.socket?.destroy();
    res.destroy();
  }

  async function handle(req: IncomingMessage, res: ServerResponse, record: SimRequestRecord): Promise<void> {
    const closed = once(res, "close").then(() => undefined);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    record.bodyBytes = chunks.reduce((n, c) => n + c.length, 0);

    const fault = header(req, "x-sim-fault") as Fault;
    const delayMs = Math.max(0, Number(header(req, "x-sim-delay-ms") ?? 0) || 0);
    const generation = flavor.isGeneration(record.path);
    // Both draws happen for every generation request, so the sequence of faults depends only on the seed and order.
    const [errorDraw, resetDraw] = generation ? [draw(), draw()] : [1, 1];

    if (fault === "hang") return closed;
    if (fault === "reset" && !isStreaming(raw)) return reset(res, record);

    const weightsHandler = weightsRoute(flavor.name, record.method, record.path);
    if (weightsHandler) {
      let body: unknown;
      try {
        body = raw.trim() === "" ? undefined : JSON.parse(raw);
      } catch (cause) {
        return sendError(
          res,
          record,
          new SimHttpError(400, `JSON decode error: ${(cause as Error).message}`, { cause }),
        );
      }
      const query = new URL(req.url ?? "/", "http://sim").searchParams;
      const answer = await weightsHandler(weights, query, body);
      return sendJson(res, record, answer.status, answer.body);
    }
    // While the weights are paused no generation starts (both servers hold new requests until resumed).
    if (generation) await weights.runnable(closed);
    if (res.destroyed) return;

    const handler = flavor.route(record.method, record.path);
    if (handler === undefined || handler === null) {
      await sleep(delayMs, closed);
      const { status, body } = handler === undefined ? flavor.notFound() : flavor.methodNotAllowed();
      return sendJson(res, record, status, body);
    }
    if (fault === "error" || errorDraw < errorRate) {
      await sleep(delayMs + timing.ttftMs, closed);
      return sendError(res, record, new SimHttpError(500, "rlgate sim: injected error"));
    }

    let reply: Reply;
    try {
      if (raw.trim() === "" && record.method === "POST")
        throw new SimHttpError(400, "Invalid request: body: Field required");
      let body: unknown;
      if (raw.trim() !== "") {
        try {
          body = JSON.parse(raw);
        } catch (cause) {
          throw new SimHttpError(400, `JSON decode error: ${(cause as Error).message}`, { cause });
        }
      }
      if (record.bodyBytes <= MAX_RECORDED_BODY) record.body = body;
      const logprobSeed = weights.logprobSeed;
      reply = handler({ body, ctx: logprobSeed === undefined ? ctx : { ...ctx, logprobSeed } });
    } catch (error) {
      await sleep(delayMs, closed);
      if (error instanceof SimHttpError) return sendError(res, record, error);
      throw error;
    }

    const prefill = generation ? prefillMs(reply) : 0;
    if (reply.kind === "json") {
      const steps = generation ? (reply.steps ?? 1) : 0;
      const latency = generation ? timing.ttftMs + prefill + Math.max(0, steps - 1) * timing.interTokenMs : 0;
      if (fault === "stall") return closed;
      // A wait-mode pause waits for a whole answer too; an abort-mode one ends it, answered as aborted.
      const running = generation ? weights.whole() : null;
      try {
        await sleep(delayMs + latency, running ? Promise.race([closed, running.interrupted]) : closed);
      } finally {
        running?.end();
      }
      if (res.destroyed) return;
      return sendJson(res, record, reply.status, running?.aborted ? abortedWhole(reply.body) : reply.body);
    }
    const cut =
      fault === "reset" || resetDraw < resetRate
        ? "reset"
        : fault === "stall" || fault === "stream-error"
          ? fault
          : undefined;
    const gate = weights.stream(record.seq);
    try {
      await writeStream(res, record, reply, delayMs + prefill, closed, cut, gate);
    } finally {
      gate.done();
    }
  }

  async function writeStream(
    res: ServerResponse,
    record: SimRequestRecord,
    reply: StreamReply,
    delayMs: number,
    closed: Promise<void>,
    cut: "reset" | "stall" | "stream-error" | undefined,
    gate: StreamGate,
  ): Promise<void> {
    // An abort-mode pause ends the stream at the next step: the steps that follow are never sampled.
    const waitOrInterrupt = Promise.race([closed, gate.interrupted]);
    record.status = 200;
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
    res.flushHeaders();
    await sleep(delayMs + timing.ttftMs, closed);
    const cutAt = Math.min(RESET_AFTER_STEPS, reply.steps.length - 1);
    const paced = timing.interTokenMs > 0;
    if (!paced) res.cork();
    for (let s = 0; s < reply.steps.length; s++) {
      if (res.destroyed) return;
      if (paced && s > 0) {
        await sleep(timing.interTokenMs, waitOrInterrupt);
        if (res.destroyed) return;
      }
      if (s > 0 && gate.held && (await gate.next(s, closed)) === "abort") {
        if (!paced) res.uncork();
        res.end(`data: ${abortChunk(reply.steps[0]?.[0])}\n\ndata: [DONE]\n\n`);
        return;
      }
      const step = reply.steps[s]!;
      if (step.length > 0) res.write(step.map((payload) => `data: ${payload}\n\n`).join(""));
      if (cut && s === cutAt) {
        if (!paced) res.uncork();
        await new Promise<void>((resolve) => res.write("", () => resolve()));
        if (cut === "stall") return closed;
        if (cut === "stream-error") return streamError(res, record);
        return reset(res, record);
      }
    }
    let tail = "";
    for (const payload of reply.tail) tail += `data: ${payload}\n\n`;
    res.end(`${tail}data: [DONE]\n\n`);
    if (!paced) res.uncork();
  }

  await listen(server, { port: options.port ?? 8000, host: options.host ?? "127.0.0.1" });
  const address = server.address() as AddressInfo;
  // Listening on every interface: loopback is the address a local client can always reach.
  const reachable = address.address === "0.0.0.0" ? "127.0.0.1" : address.address === "::" ? "::1" : address.address;
  const host = reachable.includes(":") ? `[${reachable}]` : reachable;

  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    stats,
    requests: records,
    events,
    prefixCache: prefixCache?.figures ?? null,
    weights,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

function isStreaming(raw: string): boolean {
  try {
    const body: unknown = JSON.parse(raw);
    return typeof body === "object" && body !== null && (body as Record<string, unknown>)["stream"] === true;
  } catch {
    return false;
  }
}

/** Waits `ms`, or less if the client goes away first. */
function sleep(ms: number, closed: Promise<void>): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))), closed]).finally(() =>
    clearTimeout(timer),
  );
}
