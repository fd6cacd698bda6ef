// Hostile input never takes the gateway down: each test is named after the defect of issue 11 it keeps fixed.
import { fromSnakeCase } from "../util/json-case.ts";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { startGateway, type Gateway } from "../gateway/index.ts";
import { RawJson, type CallRecord } from "../store/records.ts";
import { TOO_DEEP } from "../util/bounded-json.ts";
import {
  createRollout,
  postJson,
  rawRequest,
  readSse,
  rolloutCalls,
  spawnCli,
  startStack,
  tempDir,
  until,
  type Stack,
} from "./helpers.ts";

const MESSAGES = [{ role: "user", content: "hello" }];

/** Writes raw bytes without closing the sending side (a half-closed socket is a harness gone), until `done` matches. */
function rawExchange(url: string, bytes: string, done: RegExp): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.write(bytes));
    let text = "";
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("latin1");
      if (done.test(text)) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(text));
  });
}

/** Status and JSON body of a raw HTTP answer. */
function parseAnswer(raw: string): { status: number; body: any } {
  const answer = raw.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, "");
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1]);
  return { status, body: JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) };
}

const nested = (depth: number): string => "[".repeat(depth) + "]".repeat(depth);

describe("hostile input", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.close();
  });

  test("defect 1: request targets the URL parser refuses get a JSON 400 and the gateway goes on", async () => {
    for (const target of ["//[", "/\\", "//x:99999/", "//[::1/v1/messages"]) {
      const answer = await rawRequest(
        stack.gateway.url,
        `GET ${target} HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n`,
      );
      assert.match(answer, /^HTTP\/1\.1 400 /, `target ${target}: ${answer.slice(0, 80)}`);
      const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { error: { code: string } };
      assert.equal(body.error.code, "RLGATE_BAD_PATH");
    }
    const health = await fetch(`${stack.gateway.url}/healthz`);
    assert.equal(health.status, 200);
  });

  test("defect 2: Expect: 100-continue is answered by the gateway and no hop-by-hop header travels upstream", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const body = JSON.stringify({ messages: MESSAGES });
    const hopByHop = {
      expect: "100-continue",
      "keep-alive": "timeout=5",
      te: "trailers",
      trailer: "x-after",
      "proxy-authorization": "Basic Zm9vOmJhcg==",
      "proxy-connection": "keep-alive",
      "x-listed": "1",
      connection: "keep-alive, x-listed",
    };
    const head = Object.entries(hopByHop)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join("");
    const answer = await rawExchange(
      stack.gateway.url,
      `POST /r/${rollout.id}/v1/chat/completions HTTP/1.1\r\nhost: a\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n${head}\r\n${body}`,
      /"finish_reason"/,
    );
    assert.match(answer, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /, answer.slice(0, 120));
    const forwarded = stack.sim.requests.at(-1)!.headers;
    for (const name of Object.keys(hopByHop)) {
      // undici opens its own connection to the upstream and says so (`connection: keep-alive`); the harness's is gone.
      if (name === "connection") assert.doesNotMatch(String(forwarded[name] ?? ""), /x-listed/);
      else assert.equal(forwarded[name], undefined, `${name} was forwarded`);
    }
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(call!.status, "ok");
    // The same through the pass-through routes.
    const models = await fetch(`${rollout.base_urls.openai}/models`, {
      headers: { "proxy-authorization": "Basic x", "x-listed": "1", connection: "x-listed" },
    });
    assert.equal(models.status, 200);
    assert.equal(stack.sim.requests.at(-1)!.headers["proxy-authorization"], undefined);
    // Any other expectation fails in JSON.
    const refused = parseAnswer(
      await rawRequest(
        stack.gateway.url,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: a\r\nexpect: teapot\r\ncontent-length: 2\r\n\r\n{}",
      ),
    );
    assert.equal(refused.status, 417);
    assert.equal(refused.body.error.code, "RLGATE_EXPECTATION_FAILED");
  });

  test("defect 3: a mid-stream error event is upstream_error, partial tokens kept, and each API tells its harness", async () => {
    const fault = { "x-sim-fault": "stream-error" };
    const rollout = await createRollout(stack.gateway.url);

    // Chat: the upstream's error event reaches the harness as it was sent.
    const chat = await fetch(`${rollout.base_urls.openai}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...fault },
      body: JSON.stringify({ messages: MESSAGES, stream: true }),
    });
    const chatEvents = await readSse(chat);
    assert.ok(
      chatEvents.some((e: any) => typeof e === "object" && e.error?.message?.includes("mid-stream")),
      JSON.stringify(chatEvents),
    );

    // Messages: an `event: error`, never message_stop / end_turn.
    const messages = await fetch(`${rollout.base_urls.anthropic}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", ...fault },
      body: JSON.stringify({ model: "Qwen/Qwen3-8B", max_tokens: 64, messages: MESSAGES, stream: true }),
    });
    const messagesText = await messages.text();
    assert.match(messagesText, /event: error\n/);
    assert.doesNotMatch(messagesText, /message_stop|end_turn/);

    // Responses: response.failed, never response.completed.
    const responses = await fetch(`${rollout.base_urls.openai}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", ...fault },
      body: JSON.stringify({ model: "Qwen/Qwen3-8B", input: "hello", stream: true }),
    });
    const responsesText = await responses.text();
    assert.match(responsesText, /event: response\.failed\n/);
    assert.doesNotMatch(responsesText, /response\.completed/);

    const calls = await until(async () => {
      const found = await rolloutCalls(stack.gateway.url, rollout.id);
      return found.length === 3 ? found : undefined;
    });
    for (const call of calls) {
      assert.equal(call.status, "upstream_error", `${call.api}: ${call.error}`);
      assert.match(call.error!, /mid-stream/);
      assert.ok(call.promptTokenIds!.length > 0, `${call.api}: prompt ids kept`);
      assert.ok(call.choices[0]!.tokenIds.length > 0, `${call.api}: the partial sampled ids kept`);
    }
  });

  test("defect 4: bodies nested too deep are refused at the door, and a stored one cannot break reads", async () => {
    const deep = nested(20_000);
    const rollout = await createRollout(stack.gateway.url);
    const attempts: Array<[string, string]> = [
      [`${stack.gateway.url}/v1/chat/completions`, `{"messages":[{"role":"user","content":"x"}],"extra":${deep}}`],
      [`${stack.gateway.url}/api/rollouts`, `{"metadata":{"x":${deep}}}`],
      [
        `${rollout.base_urls.anthropic}/v1/messages`,
        `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{"a":${deep}}}]}]}`,
      ],
      [`${rollout.base_urls.openai}/responses`, `{"model":"m","input":${deep}}`],
    ];
    for (const [url, body] of attempts) {
      const res = await postJson(url, body);
      assert.equal(res.status, 400, `${url}: ${res.text.slice(0, 200)}`);
      assert.match(res.text, /nests deeper than 256 levels/);
    }
    // A body stored before the door checked depth: every read still answers, the deep part replaced.
    const store = stack.gateway.context.store;
    const record: CallRecord = {
      seq: store.nextCallSeq(),
      rolloutId: null,
      api: "chat.completions",
      path: "/v1/chat/completions",
      stream: false,
      model: null,
      status: "upstream_error",
      httpStatus: null,
      error: "stored before the door checked depth",
      requestReceived: new RawJson(`{"messages":${deep}}`),
      requestForwarded: null,
      response: null,
      promptTokenIds: null,
      choices: [],
      tokenSource: "missing",
      tokenIssue: null,
      timings: {
        start: Date.now(),
        upstreamStart: null,
        firstByte: null,
        firstToken: null,
        end: Date.now(),
        overheadMs: 0,
      },
    };
    await store.putCall(record);
    const list = await fetch(`${stack.gateway.url}/api/calls`);
    assert.equal(list.status, 200);
    const listed = fromSnakeCase<{ calls: CallRecord[] }>(await list.json()).calls.find((c) => c.seq === record.seq);
    assert.ok(listed, "the deep call is listed");
    assert.ok(JSON.stringify(listed.requestReceived).includes(TOO_DEEP));
    const one = await fetch(`${stack.gateway.url}/api/calls/${record.seq}`);
    assert.equal(one.status, 200);
  });

  test("defect 5: malformed percent-escapes and objects where strings are due are 400s", async () => {
    for (const path of ["/api/rollouts/%E0%A4%A", "/api/rollouts/%", "/api/rollouts/%ZZ/calls"]) {
      const res = await fetch(`${stack.gateway.url}${path}`);
      assert.equal(res.status, 400, path);
      assert.match(((await res.json()) as any).error.message, /malformed percent-escape/);
    }
    const rollout = await createRollout(stack.gateway.url);
    const hostileText = { toString: 1 };
    const anthropic = [
      [
        `${rollout.base_urls.anthropic}/v1/messages`,
        { model: "m", max_tokens: 5, messages: [{ role: "user", content: [{ type: "text", text: hostileText }] }] },
      ],
      [
        `${rollout.base_urls.anthropic}/v1/messages/count_tokens`,
        { model: "m", messages: [{ role: "user", content: [{ type: "text", text: hostileText }] }] },
      ],
      [
        `${rollout.base_urls.anthropic}/v1/messages`,
        { model: "m", max_tokens: 5, messages: [{ role: "user", content: [{ type: hostileText }] }] },
      ],
    ] as const;
    for (const [url, body] of anthropic) {
      const res = await postJson(url, body);
      assert.equal(res.status, 400, `${url}: ${res.text}`);
      assert.equal(res.json.type, "error");
      assert.equal(res.json.error.type, "invalid_request_error");
    }
    const openai = [
      { model: "m", input: [{ type: hostileText }] },
      { model: "m", input: [{ role: "user", content: [{ type: hostileText }] }] },
      { model: "m", input: "x", tools: [{ type: hostileText }] },
    ];
    for (const body of openai) {
      const res = await postJson(`${rollout.base_urls.openai}/responses`, body);
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, "RLGATE_BAD_REQUEST");
    }
  });

  test("defect 6: a rollout key under any spelling of the scheme is recognised and never travels upstream", async () => {
    const rollout = await createRollout(stack.gateway.url);
    for (const auth of [`bearer ${rollout.key}`, `BEARER ${rollout.key}`, `Bearer  ${rollout.key}`]) {
      const res = await postJson(
        `${stack.gateway.url}/v1/chat/completions`,
        { messages: MESSAGES },
        { authorization: auth },
      );
      assert.equal(res.status, 200, res.text);
      const forwarded = JSON.stringify(stack.sim.requests.at(-1)!.headers);
      assert.ok(!forwarded.includes("rlk_"), `${auth}: forwarded ${forwarded}`);
    }
    // Key-shaped values in any other header are dropped too.
    await postJson(
      `${rollout.base_urls.openai}/chat/completions`,
      { messages: MESSAGES },
      { "api-key": rollout.key, "x-goog-api-key": `k ${rollout.key}` },
    );
    assert.ok(!JSON.stringify(stack.sim.requests.at(-1)!.headers).includes("rlk_"));
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(calls.length, 4, "all four calls are attributed to the key's rollout");
  });

  test("defect 8: Node's own parser errors are answered in JSON", async () => {
    const cases: Array<[string, number]> = [
      ["FOO / HTTP/1.1\r\nhost: a\r\n\r\n", 400],
      ["GET /\u00e9t\u00e9 HTTP/1.1\r\nhost: a\r\n\r\n", 400],
      [`GET / HTTP/1.1\r\nhost: a\r\nx-big: ${"a".repeat(20_000)}\r\n\r\n`, 431],
      ["GET / HTTP/1.1\r\nhost: a\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n", 400],
    ];
    for (const [bytes, status] of cases) {
      const answer = parseAnswer(await rawRequest(stack.gateway.url, Buffer.from(bytes, "latin1")));
      assert.equal(answer.status, status, bytes.slice(0, 40));
      assert.ok(answer.body.error.code.startsWith("RLGATE_"));
    }
    assert.equal((await fetch(`${stack.gateway.url}/healthz`)).status, 200);
  });

  test("defect 8: GET /api/rollouts applies limit as it reads, and refuses a limit that is not a positive integer", async () => {
    for (let i = 0; i < 3; i++) await createRollout(stack.gateway.url, { group: "limit" });
    const res = await fetch(`${stack.gateway.url}/api/rollouts?limit=2&group=limit`);
    const { rollouts } = (await res.json()) as { rollouts: Array<{ createdAt: number; created_at: number }> };
    assert.equal(rollouts.length, 2);
    assert.equal((await fetch(`${stack.gateway.url}/api/rollouts?limit=-5`)).status, 400);
  });
});

describe("hostile input: credentials (defect 7)", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ gateway: { controlToken: "s3cret" } });
  });
  after(async () => {
    await stack.close();
  });
  const control = { authorization: "Bearer s3cret" };

  async function newRollout(): Promise<{ id: string; key: string; base_urls: { openai: string } }> {
    const res = await postJson(`${stack.gateway.url}/api/rollouts`, {}, control);
    assert.equal(res.status, 201);
    return res.json;
  }

  test("defect 7: with a token, harness calls need their rollout key; the id alone writes nothing", async () => {
    const rollout = await newRollout();
    const byId = await postJson(`${rollout.base_urls.openai}/chat/completions`, { messages: MESSAGES });
    assert.equal(byId.status, 401, byId.text);
    assert.match(byId.json.error.message, /rollout's key/);
    const byHeader = await postJson(
      `${stack.gateway.url}/v1/chat/completions`,
      { messages: MESSAGES },
      { "x-rlgate-rollout": rollout.id },
    );
    assert.equal(byHeader.status, 401);
    const unattributed = await postJson(`${stack.gateway.url}/v1/chat/completions`, { messages: MESSAGES });
    assert.equal(unattributed.status, 401);
    assert.equal((await fetch(`${stack.gateway.url}/v1/models`)).status, 401, "pass-through routes too");
    const withKey = await postJson(
      `${rollout.base_urls.openai}/chat/completions`,
      { messages: MESSAGES },
      { "x-api-key": rollout.key },
    );
    assert.equal(withKey.status, 200, withKey.text);
    // The driver may call with the control token; it never reaches the upstream either.
    const byDriver = await postJson(`${rollout.base_urls.openai}/chat/completions`, { messages: MESSAGES }, control);
    assert.equal(byDriver.status, 200, byDriver.text);
    assert.ok(
      !JSON.stringify(stack.sim.requests.at(-1)!.headers).includes("s3cret"),
      "the control token went upstream",
    );
    const models = await fetch(`${stack.gateway.url}/v1/models`, { headers: control });
    assert.equal(models.status, 200);
    assert.ok(
      !JSON.stringify(stack.sim.requests.at(-1)!.headers).includes("s3cret"),
      "the control token went upstream (pass-through)",
    );
    const calls = await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/calls`, { headers: control });
    assert.equal(((await calls.json()) as { calls: unknown[] }).calls.length, 2);
  });

  test("defect 7: a finished rollout refuses calls with 409 and records them as rejected, never trained", async () => {
    const rollout = await newRollout();
    const auth = { authorization: `Bearer ${rollout.key}` };
    assert.equal(
      (await postJson(`${rollout.base_urls.openai}/chat/completions`, { messages: MESSAGES }, auth)).status,
      200,
    );
    const finish = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 }, control);
    assert.equal(finish.status, 200, finish.text);
    const late = await postJson(`${rollout.base_urls.openai}/chat/completions`, { messages: MESSAGES }, auth);
    assert.equal(late.status, 409);
    assert.equal(late.json.error.code, "RLGATE_ROLLOUT_FINISHED");
    const res = await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/calls`, { headers: control });
    const { calls } = fromSnakeCase<{ calls: CallRecord[] }>(await res.json());
    assert.deepEqual(
      calls.map((c) => c.status),
      ["ok", "rejected"],
    );
    assert.equal(calls[1]!.promptTokenIds, null);
    const passthrough = await fetch(`${rollout.base_urls.openai}/models`, { headers: auth });
    assert.equal(passthrough.status, 409);
  });

  test("defect 7: /metrics follows the control token (unless --metrics-public); token checks take any scheme case", async () => {
    assert.equal((await fetch(`${stack.gateway.url}/metrics`)).status, 401);
    assert.equal(
      (await fetch(`${stack.gateway.url}/metrics`, { headers: { authorization: "bearer s3cret" } })).status,
      200,
    );
    assert.equal(
      (await fetch(`${stack.gateway.url}/api/rollouts`, { headers: { authorization: "Bearer s3cre" } })).status,
      401,
    );
    const open = await startGateway({
      upstream: stack.sim.url,
      port: 0,
      dataDir: tempDir("metrics"),
      controlToken: "t",
      metricsPublic: true,
    });
    try {
      assert.equal((await fetch(`${open.url}/metrics`)).status, 200);
    } finally {
      await open.close();
    }
  });

  test("defect 8: serve and core beyond loopback without a token refuse in one sentence, no stack trace", async () => {
    for (const args of [
      ["serve", "--host", "0.0.0.0", "--port", "0", "--upstream", stack.sim.url, "--data", tempDir("refuse")],
      ["core", "--host", "0.0.0.0", "--port", "0", "--gateway", "127.0.0.1:1", "--data", tempDir("refuse-core")],
    ]) {
      const cli = spawnCli(args, { RLGATE_TOKEN: "", RLGATE_CORE_TOKEN: "" });
      const code = await new Promise<number | null>((resolve) => cli.child.once("exit", (c) => resolve(c)));
      assert.equal(code, 1, cli.output());
      assert.match(cli.output(), /^rlgate: refusing to listen on 0\.0\.0\.0 without a (control )?token/);
      assert.doesNotMatch(cli.output(), /\n\s+at /, "no stack trace");
    }
  });
});

/** An upstream that answers every chat call with the given body (what a broken or hostile server could send). */
async function hostileUpstream(body: (stream: boolean) => string): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const stream = JSON.parse(Buffer.concat(chunks).toString()).stream === true;
      res.writeHead(200, { "content-type": stream ? "text/event-stream" : "application/json" });
      res.end(body(stream));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe("hostile input: what the upstream reports (defect 8)", () => {
  const gateways: Gateway[] = [];
  const servers: Server[] = [];
  after(async () => {
    for (const g of gateways) await g.close();
    for (const s of servers) s.close();
  });

  async function gatewayFor(body: (stream: boolean) => string): Promise<Gateway> {
    const upstream = await hostileUpstream(body);
    servers.push(upstream.server);
    const gateway = await startGateway({ upstream: upstream.url, port: 0, dataDir: tempDir("hostile-upstream") });
    gateways.push(gateway);
    return gateway;
  }

  test("defect 8: token ids outside the vocabulary and impossible choice indexes flag the call instead of being trusted", async () => {
    const huge = await gatewayFor(() =>
      JSON.stringify({
        id: "x",
        object: "chat.completion",
        model: "Qwen/Qwen3-8B",
        prompt_token_ids: [1, 2, 1e20],
        choices: [
          { index: 0, message: { role: "assistant", content: "hi" }, token_ids: [5, 6], finish_reason: "stop" },
        ],
      }),
    );
    const res = await postJson(`${huge.url}/v1/chat/completions`, { model: "Qwen/Qwen3-8B", messages: MESSAGES });
    assert.equal(res.status, 200);
    const [call] = huge.context.store.listCalls(null);
    assert.equal(call!.tokenSource, "missing");
    assert.match(call!.tokenIssue!, /prompt token id 100000000000000000000 is outside the vocabulary \(0 to 151935\)/);

    const chunk = (index: number, finish: string | null) =>
      `data: ${JSON.stringify({ id: "x", object: "chat.completion.chunk", model: "m", prompt_token_ids: [1, 2], choices: [{ index, delta: { content: "a" }, token_ids: [7], finish_reason: finish }] })}\n\n`;
    const indexes = await gatewayFor(() => chunk(1e9, "stop") + chunk(-5, "stop") + "data: [DONE]\n\n");
    const streamed = await fetch(`${indexes.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: MESSAGES, stream: true }),
    });
    assert.equal(streamed.status, 200);
    await streamed.text();
    const [streamedCall] = indexes.context.store.listCalls(null);
    assert.equal(streamedCall!.tokenSource, "missing");
    assert.match(streamedCall!.tokenIssue!, /choice index -5 is not one of the 1 choice/);
  });

  test("defect 3: a stream that ends with [DONE] but no finish reason is upstream_error, not ok", async () => {
    const gateway = await gatewayFor(
      () =>
        `data: ${JSON.stringify({ id: "x", object: "chat.completion.chunk", model: "m", prompt_token_ids: [1], choices: [{ index: 0, delta: { content: "a" }, token_ids: [7], finish_reason: null }] })}\n\n` +
        "data: [DONE]\n\n",
    );
    const res = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: MESSAGES, stream: true }),
    });
    await res.text();
    const [call] = gateway.context.store.listCalls(null);
    assert.equal(call!.status, "upstream_error");
    assert.match(call!.error!, /no finish reason/);
    assert.deepEqual(call!.choices[0]!.tokenIds, [7]);
  });
});

describe("hostile input: found by the 100k fuzz run", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.close();
  });

  test("a request without a Host header is answered in JSON by the router, not with Node's empty 400", async () => {
    const answer = parseAnswer(
      await rawRequest(
        stack.gateway.url,
        "GET //x:99999/ HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
      ),
    );
    assert.equal(answer.status, 400);
    assert.equal(answer.body.error.code, "RLGATE_BAD_PATH");
    const health = await rawRequest(stack.gateway.url, "GET /healthz HTTP/1.1\r\nconnection: close\r\n\r\n");
    assert.match(health, /^HTTP\/1\.1 200 /);
  });
});
