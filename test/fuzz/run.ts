// Sends a seeded series of hostile inputs (inputs.ts) to a gateway running in this process and checks every answer:
// the process lives and keeps answering /healthz, every error is well-formed JSON in the route's own shape, no 5xx
// is the gateway's own, no request goes unanswered, and memory stays flat. Used by the bounded test and `npm run fuzz`.
import { request as httpRequest, Agent } from "node:http";
import { connect } from "node:net";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { splitRolloutPath } from "../../gateway/attribution.ts";
import type { Gateway } from "../../gateway/index.ts";
import { PassthroughRoutes } from "../../gateway/passthrough-routes.ts";
import { isGeminiPath } from "../../gateway/surfaces/gemini/route.ts";
import { fuzzInput, type FuzzInput, type FuzzTargets } from "./inputs.ts";

export interface Memory {
  rssMb: number;
  heapMb: number;
}

export interface FuzzFigures {
  seed: number;
  inputs: number;
  /** Answers by HTTP status ("raw:NNN" for raw-socket inputs, "raw:none" when the socket was closed unanswered). */
  byStatus: Record<string, number>;
  /** What broke a promise: index, input and why (empty when all held). */
  failures: Array<{ index: number; why: string; input: string }>;
  /** 5xx answers the upstream gave and the gateway relayed verbatim (its promise for upstream errors): not failures. */
  upstreamErrors: Array<{ index: number; why: string; input: string }>;
  /** Memory after the warm-up and at the end, both after a full GC. */
  memoryBefore: Memory;
  memoryAfter: Memory;
  seconds: number;
}

/** A full garbage collection, also where node was started without --expose-gc. */
function collectGarbage(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

function memory(): Memory {
  collectGarbage();
  const usage = process.memoryUsage();
  return { rssMb: usage.rss / 2 ** 20, heapMb: usage.heapUsed / 2 ** 20 };
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

const agent = new Agent({ keepAlive: true, maxSockets: 16 });

function sendHttp(base: URL, input: Extract<FuzzInput, { kind: "http" }>, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const body = input.body === null ? null : Buffer.from(input.body);
    const headers: Record<string, string | number> = { ...input.headers };
    if (body) headers["content-length"] = body.length;
    const req = httpRequest(
      {
        host: base.hostname,
        port: base.port,
        method: input.method,
        path: input.path,
        headers,
        agent,
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }),
        );
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(body ?? undefined);
  });
}

function sendRaw(base: URL, bytes: Buffer, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: base.hostname, port: Number(base.port) }, () => socket.end(bytes));
    const chunks: Buffer[] = [];
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`socket still open after ${timeoutMs} ms`)));
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", (error: NodeJS.ErrnoException) =>
      error.code === "ECONNRESET" || error.code === "EPIPE"
        ? resolve(Buffer.concat(chunks).toString("latin1"))
        : reject(error),
    );
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")));
  });
}

const passthrough = new PassthroughRoutes();
const isPassthrough = (method: string, routePath: string) => passthrough.allows(method, routePath);

const isObject = (v: unknown): v is Record<string, any> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Why an HTTP answer breaks the gateway's promises, or null when it keeps them. */
export function judgeHttp(input: Extract<FuzzInput, { kind: "http" }>, answer: Answer): string | null {
  const routePath = (() => {
    try {
      return splitRolloutPath(new URL(input.path, "http://x").pathname).routePath;
    } catch {
      return input.path;
    }
  })();
  const fromUpstream = answer.headers["x-rlgate-call"] !== undefined || isPassthrough(input.method, routePath);
  let json: unknown = undefined;
  try {
    json = answer.body ? JSON.parse(answer.body) : undefined;
  } catch {
    json = undefined;
  }
  const ours =
    isObject(json) &&
    ((isObject(json["error"]) && String(json["error"]["code"] ?? "").startsWith("RLGATE_")) ||
      json["type"] === "error" ||
      (isObject(json["error"]) && JSON.stringify(json["error"]["details"] ?? "").includes('"reason":"RLGATE_')));
  if (answer.status >= 500 && (!fromUpstream || ours))
    return `the gateway answered ${answer.status}: ${answer.body.slice(0, 300)}`;
  if (answer.status < 400 || input.method === "HEAD") return null;
  if (!isObject(json))
    return fromUpstream ? null : `a ${answer.status} whose body is not a JSON object: ${answer.body.slice(0, 200)}`;
  const anthropic =
    (routePath === "/v1/messages" || routePath.startsWith("/v1/messages/")) && !isPassthrough(input.method, routePath);
  if (anthropic) {
    const e = json["error"];
    if (json["type"] !== "error" || !isObject(e) || typeof e["type"] !== "string" || typeof e["message"] !== "string") {
      return `a ${answer.status} on an Anthropic route not in Anthropic's error shape: ${answer.body.slice(0, 200)}`;
    }
    return null;
  }
  const e = json["error"];
  if (isGeminiPath(routePath) && !isPassthrough(input.method, routePath)) {
    if (
      isObject(e) &&
      typeof e["code"] === "number" &&
      typeof e["message"] === "string" &&
      typeof e["status"] === "string"
    )
      return null;
    return `a ${answer.status} on a Gemini route not in Google's error shape: ${answer.body.slice(0, 200)}`;
  }
  if (isObject(e) && typeof e["message"] === "string" && typeof e["type"] === "string") return null;
  if (fromUpstream) return null;
  return `a ${answer.status} not in OpenAI's error shape: ${answer.body.slice(0, 200)}`;
}

/**
 * Why a raw-socket answer breaks the promises, or null. An unanswered close is allowed (the peer sent garbage). Bytes
 * after a first request are a pipelined second one: every answer on the socket is judged.
 */
export function judgeRaw(answer: string): { status: string; why: string | null } {
  let text = answer;
  let first: string | null = null;
  while (text !== "") {
    text = text.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, "");
    if (text === "") break;
    const match = /^HTTP\/1\.1 (\d{3}) /.exec(text);
    if (!match)
      return { status: first ?? "raw:garbled", why: `not an HTTP answer: ${JSON.stringify(text.slice(0, 80))}` };
    const status = Number(match[1]);
    first ??= `raw:${status}`;
    const headEnd = text.indexOf("\r\n\r\n");
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(text.slice(0, headEnd))?.[1] ?? Number.NaN);
    if (headEnd < 0 || !Number.isFinite(length)) {
      // Success answers may be chunked (streams, /healthz); an error is always JSON of a stated length.
      if (status < 400) return { status: first, why: null };
      return {
        status: first,
        why: `a ${status} without a JSON body of known length: ${JSON.stringify(text.slice(0, 200))}`,
      };
    }
    const body = text.slice(headEnd + 4, headEnd + 4 + length);
    if (status >= 500) return { status: first, why: `the gateway answered ${status}: ${text.slice(0, 300)}` };
    if (status >= 400) {
      try {
        const json: unknown = JSON.parse(body);
        if (!isObject(json)) throw new Error("not an object");
      } catch {
        return { status: first, why: `a ${status} whose body is not JSON: ${JSON.stringify(body.slice(0, 120))}` };
      }
    }
    text = text.slice(headEnd + 4 + length);
  }
  return { status: first ?? "raw:none", why: null };
}

async function createTargets(url: string, headers: Record<string, string>): Promise<FuzzTargets> {
  const create = async () => {
    const res = await fetch(`${url}/api/rollouts`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: "{}",
    });
    if (res.status !== 201) throw new Error(`create rollout: ${res.status}`);
    return (await res.json()) as { id: string; key: string };
  };
  const open = [await create(), await create(), await create()];
  const finished = await create();
  await fetch(`${url}/api/rollouts/${finished.id}/finish`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: '{"reward":0}',
  });
  return { open, finished };
}

export interface FuzzOptions {
  gateway: Gateway;
  seed: number;
  count: number;
  concurrency?: number;
  /** Inputs sent before the first memory figure (caches, pools and JIT warm up). */
  warmup?: number;
  /** Headers of the driver's own control-API calls (the token, when the gateway has one). */
  controlHeaders?: Record<string, string>;
  timeoutMs?: number;
  onProgress?: (done: number) => void;
}

export async function runFuzz(options: FuzzOptions): Promise<FuzzFigures> {
  const base = new URL(options.gateway.url);
  const started = performance.now();
  const figures: FuzzFigures = {
    seed: options.seed,
    inputs: 0,
    byStatus: {},
    failures: [],
    upstreamErrors: [],
    memoryBefore: { rssMb: 0, heapMb: 0 },
    memoryAfter: { rssMb: 0, heapMb: 0 },
    seconds: 0,
  };
  const timeoutMs = options.timeoutMs ?? 30_000;
  const warmup = Math.min(options.warmup ?? 300, options.count);
  let targets = await createTargets(options.gateway.url, options.controlHeaders ?? {});
  const count = (key: string) => (figures.byStatus[key] = (figures.byStatus[key] ?? 0) + 1);

  async function one(index: number): Promise<void> {
    const input = fuzzInput(options.seed, index, targets);
    const shown = () =>
      input.kind === "raw"
        ? `raw ${JSON.stringify(input.bytes.toString("latin1").slice(0, 300))}`
        : `${input.method} ${input.path} ${JSON.stringify(input.headers)} ${(input.body ?? "").slice(0, 300)}`;
    try {
      if (input.kind === "raw") {
        const verdict = judgeRaw(await sendRaw(base, input.bytes, timeoutMs));
        count(verdict.status);
        if (verdict.why) figures.failures.push({ index, why: verdict.why, input: shown() });
      } else {
        const answer = await sendHttp(base, input, timeoutMs);
        count(String(answer.status));
        const why = judgeHttp(input, answer);
        if (why) figures.failures.push({ index, why, input: shown() });
        else if (answer.status >= 500)
          figures.upstreamErrors.push({
            index,
            why: `${answer.status} from the upstream: ${answer.body.slice(0, 200)}`,
            input: shown(),
          });
      }
    } catch (error) {
      count("no-answer");
      figures.failures.push({ index, why: `no answer: ${(error as Error).message}`, input: shown() });
    }
    figures.inputs++;
  }

  async function batch(from: number, to: number): Promise<void> {
    let next = from;
    const worker = async () => {
      while (next < to) {
        const index = next++;
        await one(index);
        options.onProgress?.(figures.inputs);
        // Fuzzed finishes close the target rollouts: fresh ones now and then keep calls reaching the capture path.
        if (index % 500 === 499) targets = await createTargets(options.gateway.url, options.controlHeaders ?? {});
      }
    };
    await Promise.all(Array.from({ length: options.concurrency ?? 8 }, worker));
    const health = await fetch(`${options.gateway.url}/healthz`);
    if (health.status !== 200)
      figures.failures.push({ index: to, why: `/healthz answered ${health.status}`, input: "GET /healthz" });
  }

  await batch(0, warmup);
  figures.memoryBefore = memory();
  for (let from = warmup; from < options.count; from += 1000) await batch(from, Math.min(options.count, from + 1000));
  figures.memoryAfter = memory();
  figures.seconds = (performance.now() - started) / 1000;
  return figures;
}

/** The figures as lines for a person. */
export function formatFigures(f: FuzzFigures): string {
  const statuses = Object.entries(f.byStatus)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, n]) => `${status}: ${n}`)
    .join(", ");
  const mb = (m: Memory) => `rss ${m.rssMb.toFixed(1)} MB, heap ${m.heapMb.toFixed(1)} MB`;
  return [
    `inputs: ${f.inputs} (seed ${f.seed}) in ${f.seconds.toFixed(1)} s (${(f.inputs / f.seconds).toFixed(0)}/s)`,
    `answers by status: ${statuses}`,
    `memory after warm-up: ${mb(f.memoryBefore)}`,
    `memory at the end:    ${mb(f.memoryAfter)} (heap ${f.memoryAfter.heapMb - f.memoryBefore.heapMb >= 0 ? "+" : ""}${(f.memoryAfter.heapMb - f.memoryBefore.heapMb).toFixed(1)} MB)`,
    `upstream 5xx relayed verbatim: ${f.upstreamErrors.length}`,
    ...f.upstreamErrors.slice(0, 5).map((x) => `  #${x.index}: ${x.why}\n      ${x.input}`),
    `broken promises: ${f.failures.length}`,
    ...f.failures.slice(0, 20).map((x) => `  #${x.index}: ${x.why}\n      ${x.input}`),
  ].join("\n");
}
