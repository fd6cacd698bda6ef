// The live UI's routes on the gateway: the page and its assets under /ui (static, no data in them), the event stream
// /api/events (server-sent events of committed calls, rollouts, agreement reports and replay runs), /api/decode
// (token ids → text, for the token view) and the report routes (reports-route.ts). Data routes honour the control
// API's token like the rest of /api.
import { toSnakeCase } from "../util/json-case.ts";
import { bearerMatches } from "../util/secrets.ts";
import { readFileSync, readdirSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { CallRecord, RolloutRecord } from "../store/records.ts";
import type { AgreementRecord, ReplaySummary } from "../store/reports.ts";
import { handleReport, isReportPath, type UiReports } from "./reports-route.ts";
import type { StoreEvents } from "../store/store.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";

/** The part of an event emitter the UI needs: the store's. */
export interface UiEventSource {
  on<E extends keyof StoreEvents>(event: E, listener: (...args: StoreEvents[E]) => void): unknown;
  off<E extends keyof StoreEvents>(event: E, listener: (...args: StoreEvents[E]) => void): unknown;
}

/** Events committed by other gateway workers (`rlgate serve --workers N`), already in the shape the browser gets. */
export type RelayedUiEvent = "call" | "rollout" | "agreement" | "replay";

export interface RelayedUiEvents {
  on(listener: (event: RelayedUiEvent, data: unknown) => void): void;
  off(listener: (event: RelayedUiEvent, data: unknown) => void): void;
}

export interface UiOptions {
  events: UiEventSource;
  /** Agreement figures and replay runs (the store). */
  reports: UiReports;
  /** Other workers' events: a browser connected to any worker sees every worker's calls. */
  relayed?: RelayedUiEvents;
  /** The control API's token: /api/events and /api/decode need it when set. */
  token: string | null;
  /** Open event streams at most (each holds a socket); more are refused with 503. */
  maxClients?: number;
  /** Heartbeat interval of the event stream (a comment line), so proxies and clients see it alive. */
  heartbeatMs?: number;
}

export interface UiRoutes {
  /** Whether this module answers `path`. */
  matches(path: string): boolean;
  handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void>;
  /** Open event streams. */
  readonly clients: number;
}

const STATIC_DIR = fileURLToPath(new URL("./static/", import.meta.url));
const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
};
/** A slow event-stream reader is cut off past this much unsent data; it reconnects and reloads what it shows. */
const MAX_BUFFERED = 1 << 20;
const MAX_DECODE_IDS = 1 << 20;
const MAX_DECODE_BODY = 16 << 20;
// The page's own assets only: no inline scripts, no other origins.
const CSP =
  "default-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

function loadAssets(): Map<string, { body: Buffer; type: string }> {
  const assets = new Map<string, { body: Buffer; type: string }>();
  for (const name of readdirSync(STATIC_DIR)) {
    const type = TYPES[extname(name)];
    if (type) assets.set(name, { body: readFileSync(join(STATIC_DIR, name)), type });
  }
  return assets;
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(toSnakeCase(value));
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) }).end(body);
}

function sendError(res: ServerResponse, status: number, code: string, message: string): void {
  const type =
    status === 401
      ? "authentication_error"
      : status === 404
        ? "not_found_error"
        : status === 503
          ? "overloaded_error"
          : "invalid_request_error";
  sendJson(res, status, { error: { message, type, param: null, code } });
}

/** What the UI shows of a call as it happens: no bodies (the inspector fetches them on demand). */
export function callEvent(call: CallRecord) {
  return {
    seq: call.seq,
    rolloutId: call.rolloutId,
    api: call.api,
    model: call.model,
    stream: call.stream,
    status: call.status,
    httpStatus: call.httpStatus,
    tokenSource: call.tokenSource,
    tokenIssue: call.tokenIssue,
    promptTokens: call.promptTokenIds?.length ?? 0,
    sampledTokens: call.choices.reduce((n, c) => n + c.tokenIds.length, 0),
    timings: call.timings,
  };
}

/** A rollout as the UI shows it: never its key. */
export function rolloutEvent(rollout: RolloutRecord) {
  const { key: _key, ...rest } = rollout;
  return rest;
}

async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new RangeError(`body over ${limit} bytes`);
    chunks.push(chunk as Buffer);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

export function createUiRoutes(options: UiOptions): UiRoutes {
  const assets = loadAssets();
  const maxClients = options.maxClients ?? 64;
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  let clients = 0;
  const texts = new Map<number, string>();

  const authorized = (req: IncomingMessage) =>
    !options.token || bearerMatches(req.headers["authorization"], options.token);

  function events(req: IncomingMessage, res: ServerResponse): void {
    if (clients >= maxClients)
      return sendError(res, 503, "RLGATE_UI_BUSY", `${maxClients} event streams are open already`);
    clients++;
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
    });
    res.write(`retry: 2000\nevent: hello\ndata: ${JSON.stringify({ at: Date.now() })}\n\n`);
    const send = (event: string, data: unknown) => {
      if (res.writableLength > MAX_BUFFERED) return void res.destroy();
      res.write(`event: ${event}\ndata: ${JSON.stringify(toSnakeCase(data))}\n\n`);
    };
    const onCall = (call: CallRecord) => send("call", callEvent(call));
    const onRollout = (rollout: RolloutRecord) => send("rollout", rolloutEvent(rollout));
    const onAgreement = (record: AgreementRecord) => send("agreement", record);
    const onReplay = (record: ReplaySummary) => send("replay", record);
    options.events.on("call", onCall);
    options.events.on("rollout", onRollout);
    options.events.on("agreement", onAgreement);
    options.events.on("replay", onReplay);
    const onRelayed = (event: RelayedUiEvent, data: unknown) => send(event, data);
    options.relayed?.on(onRelayed);
    const heartbeat = setInterval(() => res.write(`: ${Date.now()}\n\n`), heartbeatMs);
    heartbeat.unref();
    res.once("close", () => {
      clients--;
      clearInterval(heartbeat);
      options.events.off("call", onCall);
      options.events.off("rollout", onRollout);
      options.events.off("agreement", onAgreement);
      options.events.off("replay", onReplay);
      options.relayed?.off(onRelayed);
    });
    req.resume();
  }

  async function decode(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: unknown;
    try {
      body = await readJson(req, MAX_DECODE_BODY);
    } catch (error) {
      return sendError(
        res,
        400,
        "RLGATE_BAD_REQUEST",
        `the body must be JSON {"ids": [...]} (${(error as Error).message})`,
      );
    }
    const ids = (body as { ids?: unknown } | null)?.ids;
    if (!Array.isArray(ids) || ids.length > MAX_DECODE_IDS || !ids.every((id) => Number.isSafeInteger(id) && id >= 0)) {
      return sendError(res, 400, "RLGATE_BAD_REQUEST", `ids: an array of at most ${MAX_DECODE_IDS} token ids`);
    }
    const tokenizer = qwen3Tokenizer();
    const out: Record<number, string> = {};
    for (const id of ids as number[]) {
      let text = texts.get(id);
      if (text === undefined) texts.set(id, (text = tokenizer.decode([id])));
      out[id] = text;
    }
    sendJson(res, 200, { texts: out });
  }

  return {
    get clients() {
      return clients;
    },
    matches: (path) =>
      path === "/ui" ||
      path.startsWith("/ui/") ||
      path === "/api/events" ||
      path === "/api/decode" ||
      isReportPath(path),
    async handle(req, res, url) {
      const path = url.pathname;
      if (path === "/ui") {
        res.writeHead(308, { location: `/ui/${url.search}` }).end();
        return;
      }
      if (path.startsWith("/ui/")) {
        if (req.method !== "GET" && req.method !== "HEAD")
          return sendError(res, 405, "RLGATE_BAD_REQUEST", `${req.method} is not served under /ui`);
        const asset = assets.get(path === "/ui/" ? "index.html" : path.slice("/ui/".length));
        if (!asset) return sendError(res, 404, "RLGATE_NOT_FOUND", `no UI asset ${path}`);
        res.writeHead(200, {
          "content-type": asset.type,
          "content-length": asset.body.length,
          "content-security-policy": CSP,
          "cache-control": "no-cache",
        });
        res.end(req.method === "HEAD" ? undefined : asset.body);
        return;
      }
      if (!authorized(req))
        return sendError(
          res,
          401,
          "RLGATE_UNAUTHORIZED",
          "the control API needs 'Authorization: Bearer <token>' (--token)",
        );
      if (path === "/api/events" && req.method === "GET") return events(req, res);
      if (path === "/api/decode" && req.method === "POST") return decode(req, res);
      if (isReportPath(path))
        return handleReport(
          options.reports,
          req,
          url,
          (status, value) => sendJson(res, status, value),
          (status, code, message) => sendError(res, status, code, message),
        );
      return sendError(res, 405, "RLGATE_BAD_REQUEST", `${req.method} ${path} is not served`);
    },
  };
}
