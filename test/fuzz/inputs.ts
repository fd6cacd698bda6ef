// Seeded hostile inputs for the gateway: every route and method, headers a careless or hostile client sends, bodies
// that start from a valid request of each API and are bent at one random place, and raw bytes on the socket. The
// same seed gives the same inputs, so a failure names the seed and index that reproduce it.
import { seededRandom } from "../../util/seeded-random.ts";

export const MODEL = "Qwen/Qwen3-8B";

export interface FuzzTargets {
  /** Rollouts the inputs may name: open ones (with their keys), and one finished. */
  open: Array<{ id: string; key: string }>;
  finished: { id: string; key: string };
}

/** One HTTP request (sent with undici) or raw bytes (sent on a socket). */
export type FuzzInput =
  | { kind: "http"; method: string; path: string; headers: Record<string, string>; body: string | null }
  | { kind: "raw"; bytes: Buffer };

type Rng = () => number;
const pick = <T>(rng: Rng, items: readonly T[]): T => items[Math.floor(rng() * items.length)]!;
const chance = (rng: Rng, p: number): boolean => rng() < p;

const nested = (depth: number, leaf = "1"): string => "[".repeat(depth) + leaf + "]".repeat(depth);

/** Values put where a request expects something else. */
const HOSTILE_VALUES: ReadonlyArray<(rng: Rng) => unknown> = [
  () => ({ toString: 1 }),
  () => ({ valueOf: 1, toString: 1 }),
  () => ({ toJSON: 1 }),
  () => null,
  () => [],
  () => ({}),
  () => "",
  () => "\u0000\ud800\udfff\u202e",
  () => "x".repeat(20_000),
  () => 1e308,
  () => -1,
  () => 1.5,
  () => 2 ** 53 + 1,
  () => true,
  () => "%E0%A4%A",
  () => ({ __proto__: { polluted: 1 }, constructor: { prototype: { polluted: 1 } } }),
  () => [{ toString: 1 }],
  (rng) => JSON.parse(nested(1 + Math.floor(rng() * 200))),
  () => JSON.parse(nested(300)),
  () => "rlk_not_a_real_key",
];

/** Gemini's routes: the model in the path (mapped by the fuzz stack's --model-map), the stream framing in the query. */
export const GEMINI_MODEL_MAP = "gemini-*=Qwen/Qwen3-8B";
const GEMINI_ROUTES = [
  "/v1beta/models/gemini-fuzz:generateContent",
  "/v1beta/models/gemini-fuzz:streamGenerateContent?alt=sse",
  "/v1beta/models/gemini-fuzz:streamGenerateContent",
  "/v1beta/models/gemini-fuzz:countTokens",
];

function geminiSeed(rng: Rng): Record<string, unknown> {
  return {
    systemInstruction: pick(rng, ["be brief", { parts: [{ text: "be brief" }] }]),
    contents: [
      { role: "user", parts: [{ text: "hi" }] },
      {
        role: "model",
        parts: [
          { text: "thinking", thought: true },
          { functionCall: { id: "c1", name: "run", args: { c: "ls" } }, thoughtSignature: "cmxnYXRlLnYxLng=" },
        ],
      },
      { role: "user", parts: [{ functionResponse: { id: "c1", name: "run", response: { output: "a b" } } }] },
    ],
    tools: [
      {
        functionDeclarations: [{ name: "run", parameters: { type: "OBJECT", properties: { c: { type: "STRING" } } } }],
      },
    ],
    toolConfig: { functionCallingConfig: { mode: pick(rng, ["AUTO", "ANY", "NONE"]) } },
    generationConfig: {
      maxOutputTokens: 16,
      temperature: 0.5,
      ...(chance(rng, 0.3) ? { thinkingConfig: { thinkingBudget: pick(rng, [0, 128]), includeThoughts: true } } : {}),
      ...(chance(rng, 0.2) ? { candidateCount: 2 } : {}),
    },
  };
}

/** Valid requests of each API: the starting points mutations bend. */
function seeds(rng: Rng): Record<string, () => Record<string, unknown>> {
  const stream = () => chance(rng, 0.4);
  return {
    "/v1/chat/completions": () => ({
      model: MODEL,
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hi" },
      ],
      max_tokens: 8,
      stream: stream(),
      ...(chance(rng, 0.2) ? { n: 2 } : {}),
      ...(chance(rng, 0.3)
        ? {
            tools: [
              {
                type: "function",
                function: { name: "run", parameters: { type: "object", properties: { c: { type: "string" } } } },
              },
            ],
          }
        : {}),
    }),
    "/v1/completions": () => ({
      model: MODEL,
      prompt: pick(rng, ["hello", ["a", "b"], [1, 2, 3]]),
      max_tokens: 8,
      stream: stream(),
    }),
    "/v1/responses": () => ({
      model: MODEL,
      input: pick(rng, ["hi", [{ role: "user", content: [{ type: "input_text", text: "hi" }] }]]),
      max_output_tokens: 16,
      stream: stream(),
      ...(chance(rng, 0.3)
        ? { tools: [{ type: "function", name: "run", parameters: { type: "object", properties: {} } }] }
        : {}),
    }),
    "/v1/messages": () => ({
      model: MODEL,
      max_tokens: 16,
      stream: stream(),
      system: pick(rng, ["be brief", [{ type: "text", text: "be brief" }]]),
      messages: [
        { role: "user", content: [{ type: "text", text: "hi" }] },
        { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "run", input: { c: "ls" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "a b" }] },
      ],
      tools: [{ name: "run", input_schema: { type: "object", properties: { c: { type: "string" } } } }],
    }),
    "/v1/messages/count_tokens": () => ({ model: MODEL, messages: [{ role: "user", content: "hi" }] }),
    ...Object.fromEntries(GEMINI_ROUTES.map((route) => [route, () => geminiSeed(rng)])),
    "/api/rollouts": () => ({ group: "fuzz", task: "t", harness: "h", metadata: { a: [1, { b: "c" }] } }),
    finish: () => ({ reward: 1, status: pick(rng, ["ok", "infra_error", "timeout", "aborted"]) }),
  };
}

/** Every object and array inside `value`, with a way to replace or delete one of its entries. */
function slots(value: unknown, out: Array<{ holder: Record<string, unknown> | unknown[]; key: string | number }> = []) {
  if (typeof value !== "object" || value === null) return out;
  const holder = value as Record<string, unknown> | unknown[];
  for (const key of Array.isArray(holder) ? holder.keys() : Object.keys(holder)) {
    out.push({ holder, key });
    slots((holder as Record<string | number, unknown>)[key], out);
  }
  return out;
}

/** A valid body bent at one or two random places, or replaced whole by something that is not one. */
function mutatedBody(rng: Rng, seed: Record<string, unknown>): string {
  const roll = rng();
  if (roll < 0.08)
    return pick(rng, [
      "",
      "{",
      "nul",
      "[]",
      "1",
      '"x"',
      "{}",
      '{"a":1,}',
      "\ufeff{}",
      nested(5_000),
      '{"a":' + nested(20_000) + "}",
    ]);
  if (roll < 0.2) return JSON.stringify(seed); // valid as it is
  const body = structuredClone(seed);
  for (let n = 1 + Math.floor(rng() * 2); n > 0; n--) {
    const all = slots(body);
    if (all.length === 0) break;
    const { holder, key } = pick(rng, all);
    if (chance(rng, 0.15)) {
      if (Array.isArray(holder)) holder.splice(key as number, 1);
      else delete holder[key as string];
    } else {
      (holder as Record<string | number, unknown>)[key] = pick(rng, HOSTILE_VALUES)(rng);
    }
  }
  if (chance(rng, 0.1))
    (body as Record<string, unknown>)[pick(rng, ["extra", "__proto__", "stream", "n", "max_tokens"])] = pick(
      rng,
      HOSTILE_VALUES,
    )(rng);
  return JSON.stringify(body);
}

function headersFor(rng: Rng, targets: FuzzTargets, rollout: { id: string; key: string }): Record<string, string> {
  const headers: Record<string, string> = {};
  if (chance(rng, 0.9))
    headers["content-type"] = pick(rng, ["application/json", "text/plain", "application/json; charset=latin1"]);
  const auth = rng();
  if (auth < 0.3)
    headers["authorization"] =
      `${pick(rng, ["Bearer", "bearer", "BEARER", "Basic", "Token"])} ${pick(rng, [rollout.key, targets.finished.key, "rlk_unknown", "s3cret", ""])}`;
  else if (auth < 0.4) headers["x-api-key"] = pick(rng, [rollout.key, "rlk_unknown", " rlk_ "]);
  else if (auth < 0.45) headers["x-goog-api-key"] = pick(rng, [rollout.key, "rlk_unknown", "AIzaNotOurs"]);
  if (chance(rng, 0.15))
    headers["x-rlgate-rollout"] = pick(rng, [rollout.id, targets.finished.id, "no-such", "../../etc", "%00"]);
  if (chance(rng, 0.1)) headers["expect"] = pick(rng, ["100-continue", "200-ok"]);
  if (chance(rng, 0.15)) {
    const [name, value] = pick(rng, [
      ["connection", "keep-alive, x-secret"],
      ["x-secret", "1"],
      ["te", "trailers"],
      ["proxy-authorization", "Basic eDp5"],
      ["upgrade", "websocket"],
      ["accept-encoding", "gzip, br"],
      ["anthropic-version", "2023-06-01"],
      ["x-stainless-os", "\u00e9"],
    ] as const);
    headers[name] = value;
  }
  return headers;
}

const CAPTURED = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/responses",
  "/v1/messages",
  "/v1/messages/count_tokens",
  ...GEMINI_ROUTES,
];
const METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"];

function pathFor(rng: Rng, targets: FuzzTargets, rollout: { id: string }): { path: string; seed: string | null } {
  const roll = rng();
  if (roll < 0.55) {
    const route = pick(rng, CAPTURED);
    const prefix = pick(rng, [
      "",
      `/r/${rollout.id}`,
      `/r/${rollout.id}`,
      `/r/${targets.finished.id}`,
      "/r/no-such",
      "/r/%ZZ",
    ]);
    return { path: prefix + route, seed: route };
  }
  if (roll < 0.75) {
    const id = pick(rng, [
      rollout.id,
      targets.finished.id,
      "no-such",
      "%E0%A4%A",
      "%",
      "%ZZ",
      "..%2F..",
      "a".repeat(300),
    ]);
    const path = pick(rng, [
      "/api/rollouts",
      `/api/rollouts?limit=${pick(rng, ["2", "-5", "abc", "1e400", "0", ""])}&status=${pick(rng, ["open", "ok", "%"])}`,
      `/api/rollouts/${id}`,
      `/api/rollouts/${id}/finish`,
      `/api/rollouts/${id}/calls`,
      `/api/rollouts/${id}/calls/${pick(rng, ["1", "-1", "1e999", "x"])}`,
      `/api/rollouts/${id}/trajectories`,
      "/api/calls",
      `/api/calls/${pick(rng, ["1", "x", "%"])}`,
      "/api",
      "/api/",
    ]);
    return {
      path,
      seed: path.endsWith("/finish") ? "finish" : path.startsWith("/api/rollouts") ? "/api/rollouts" : null,
    };
  }
  if (roll < 0.9) {
    return {
      path: pick(rng, [
        "/v1/models",
        `/r/${rollout.id}/v1/models`,
        "/tokenize",
        "/health",
        "/metrics",
        "/healthz",
        "/v2/x",
        "/v1/embeddings",
        "/v1beta/models/gemini-fuzz",
        `/r/${rollout.id}/v1beta/models/gemini-fuzz`,
        "/v1beta/models/gemini-fuzz:embedContent",
        "/v1beta/models/gemini-fuzz:generateContent?key=rlk_unknown&alt=sse",
      ]),
      seed: null,
    };
  }
  return {
    path: pick(rng, [
      "/",
      "/nope",
      "/r/",
      "/r//v1/chat/completions",
      "/%",
      "/r/x/%ZZ",
      "/ui",
      "//",
      "/v1/../api/calls",
    ]),
    seed: null,
  };
}

/** Raw bytes: request lines and headers Node's parser may refuse, or that no URL parser takes. */
function rawInput(rng: Rng): Buffer {
  const line = pick(rng, [
    "GET //[ HTTP/1.1",
    "GET /\\ HTTP/1.1",
    "GET //x:99999/ HTTP/1.1",
    "FOO / HTTP/1.1",
    "GET /\u00e9 HTTP/1.1",
    "GET / HTTP/9.9",
    "GET / HTTP/1.1 extra",
    "POST /v1/chat/completions HTTP/1.1",
    "GET /api/rollouts/%E0%A4%A HTTP/1.1",
    "\u0000\u0001\u0002",
    "GET",
  ]);
  const headers = [
    "host: a",
    pick(rng, [
      "content-length: 5",
      "content-length: -1",
      "content-length: 1\r\ncontent-length: 2",
      "transfer-encoding: chunked",
      "transfer-encoding: chunked\r\ncontent-length: 3",
      `x-big: ${"a".repeat(pick(rng, [100, 20_000, 70_000]))}`,
      "bad header",
      "x-ctl: \u0001",
      "expect: 100-continue\r\ncontent-length: 2",
    ]),
  ];
  const body = pick(rng, ["", "{}", "hello", "5\r\nhello\r\n0\r\n\r\n", "zz\r\n"]);
  const text = `${line}\r\n${headers.join("\r\n")}\r\nconnection: close\r\n\r\n${body}`;
  const bytes = Buffer.from(text, "latin1");
  // Sometimes flip a few random bytes.
  if (chance(rng, 0.3)) for (let i = 0; i < 3; i++) bytes[Math.floor(rng() * bytes.length)] = Math.floor(rng() * 256);
  return bytes;
}

/** The `index`-th input of the series `seed` (each input is drawn from its own generator: any one can be replayed). */
export function fuzzInput(seed: number, index: number, targets: FuzzTargets): FuzzInput {
  const rng = seededRandom((seed * 1_000_003 + index) >>> 0);
  if (chance(rng, 0.1)) return { kind: "raw", bytes: rawInput(rng) };
  const rollout = pick(rng, targets.open);
  const { path, seed: seedName } = pathFor(rng, targets, rollout);
  const method =
    seedName !== null && chance(rng, 0.85)
      ? path.includes("/calls") || path.endsWith("/trajectories")
        ? "GET"
        : "POST"
      : pick(rng, METHODS);
  const seedBody = seedName !== null ? seeds(rng)[seedName]?.() : undefined;
  const body =
    method === "GET" || method === "HEAD"
      ? null
      : seedBody
        ? mutatedBody(rng, seedBody)
        : chance(rng, 0.5)
          ? mutatedBody(rng, { a: 1 })
          : null;
  return { kind: "http", method, path, headers: headersFor(rng, targets, rollout), body };
}
