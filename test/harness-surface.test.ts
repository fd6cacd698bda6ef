// What a harness (or an agent holding its base URL) can reach through the gateway: its rollout's captured APIs and
// the allowed pass-through routes, by no spelling of a path anything else; and no secret rlgate knows travels on.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startGateway } from "../gateway/index.ts";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createRollout, postJson, rawRequest, startStack, type Stack } from "./helpers.ts";

const TOKEN = "s3cret-control-token";

/** Status of a request sent with its path exactly as written (no client-side normalization). */
async function sendRaw(url: string, method: string, path: string, body = "", headers = ""): Promise<number> {
  const answer = await rawRequest(
    url,
    `${method} ${path} HTTP/1.1\r\nhost: a\r\ncontent-type: application/json\r\n${headers}` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
  return Number(/^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1]);
}

/** Every spelling of "two levels up, then the control API's finish route" this suite tries. */
function traversals(id: string, target: string): string[] {
  const tail = target.replace(/^\//, "");
  return [
    `/r/${id}/../../${tail}`,
    `/r/${id}/v1/../../../${tail}`,
    `/r/${id}/%2e%2e/%2e%2e/${tail}`,
    `/r/${id}/%2E%2E/%2e%2E/${tail}`,
    `/r/${id}/.%2e/.%2e/${tail}`,
    `/r/${id}/%2e./%2e./${tail}`,
    `/r/${id}/..%2f..%2f${tail.replaceAll("/", "%2f")}`,
    `/r/${id}/..%5c..%5c${tail}`,
    `/r/${id}\\..\\..\\${tail.replaceAll("/", "\\")}`,
    `/r/${id}/%252e%252e/%252e%252e/${tail}`,
    `/r/${id}/./../../${tail}`,
    `//r/${id}/../../${tail}`,
    `http://127.0.0.1/${tail}`,
  ];
}

describe("the harness surface", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(() => stack.close());

  test("a path with dot segments, encoded separators or backslashes is refused before routing", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const victim = await createRollout(stack.gateway.url);
    const finish = JSON.stringify({ reward: 1 });
    for (const target of [
      `/api/rollouts/${rollout.id}/finish`,
      `/api/rollouts/${victim.id}/finish`,
      `/api/rollouts`,
      `/api/rollouts/${victim.id}`,
      "/api/events",
      "/metrics",
      "/ui",
    ]) {
      for (const path of traversals(rollout.id, target)) {
        for (const method of ["POST", "GET"]) {
          const status = await sendRaw(stack.gateway.url, method, path, method === "POST" ? finish : "");
          assert.equal(status, 400, `${method} ${path} answered ${status}`);
        }
      }
    }
    for (const id of [rollout.id, victim.id]) {
      const state = (await (await fetch(`${stack.gateway.url}/api/rollouts/${id}`)).json()) as { status: string };
      assert.equal(state.status, "open", `rollout ${id} was finished through a traversal`);
    }
  });

  test("of the upstream's other routes only the allowed ones are passed; admin routes answer 404", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const before = stack.sim.requests.length;
    for (const [method, route] of [
      ["POST", "/v1/load_lora_adapter"],
      ["POST", "/v1/unload_lora_adapter"],
      ["POST", "/pause"],
      ["POST", "/resume"],
      ["POST", "/sleep"],
      ["POST", "/reset_prefix_cache"],
      ["POST", "/update_weights_from_disk"],
      ["GET", "/v2/anything"],
      ["DELETE", "/v1/models"],
      ["POST", "/v1/models"],
      ["GET", "/get_server_info"],
    ] as const) {
      for (const base of [`${stack.gateway.url}/r/${rollout.id}`, stack.gateway.url]) {
        const res = await fetch(`${base}${route}`, {
          method,
          ...(method === "POST" ? { body: JSON.stringify({ lora_name: "x", lora_path: "/tmp/x" }) } : {}),
          headers: { "content-type": "application/json" },
        });
        assert.equal(res.status, 404, `${method} ${base}${route} answered ${res.status}`);
        const body = (await res.json()) as { error: { code: string; message: string } };
        assert.equal(body.error.code, "RLGATE_NOT_FOUND");
        assert.match(body.error.message, /--passthrough/);
      }
    }
    assert.equal(stack.sim.requests.length, before, "nothing reached the upstream");
    for (const route of ["/v1/models", "/v1/models/Qwen/Qwen3-8B", "/health"])
      await (await fetch(`${stack.gateway.url}/r/${rollout.id}${route}`)).arrayBuffer();
    await postJson(`${stack.gateway.url}/r/${rollout.id}/tokenize`, { prompt: "hi" });
    assert.deepEqual(
      stack.sim.requests.slice(before).map((r) => `${r.method} ${r.path}`),
      ["GET /v1/models", "GET /v1/models/Qwen/Qwen3-8B", "GET /health", "POST /tokenize"],
      "the allowed routes reached the upstream",
    );
  });

  test("--passthrough names more routes; a malformed one is refused when the gateway starts", async () => {
    const gateway = await startGateway({
      upstream: stack.sim.url,
      port: 0,
      dataDir: stack.dataDir + "-passthrough",
      passthrough: ["GET /get_server_info", "/v2/*"],
    });
    try {
      const before = stack.sim.requests.length;
      await (await fetch(`${gateway.url}/get_server_info`)).arrayBuffer();
      await (await fetch(`${gateway.url}/v2/a/b`, { method: "POST", body: "{}" })).arrayBuffer();
      assert.equal((await fetch(`${gateway.url}/v2`)).status, 404, "a prefix route needs a path below it");
      assert.deepEqual(
        stack.sim.requests.slice(before).map((r) => `${r.method} ${r.path}`),
        ["GET /get_server_info", "POST /v2/a/b"],
      );
    } finally {
      await gateway.close();
    }
    for (const bad of ["/v1/../api", "FETCH /x", "v1/x", "/", "GET /a b c"])
      await assert.rejects(
        startGateway({ upstream: stack.sim.url, port: 0, dataDir: stack.dataDir + "-bad", passthrough: [bad] }),
        new RegExp(bad.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")),
      );
  });
});

describe("secrets never leave towards the upstream", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ gateway: { controlToken: TOKEN, requireKey: false } });
  });
  after(() => stack.close());

  const create = async () => {
    const res = await fetch(`${stack.gateway.url}/api/rollouts`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      body: "{}",
    });
    return (await res.json()) as { id: string; key: string; base_urls: { openai: string } };
  };
  const upstreamSaw = (from: number) => JSON.stringify(stack.sim.requests.slice(from));

  test("in any header, the query or the body, on captured and pass-through routes", async () => {
    const rollout = await create();
    const other = await create();
    const from = stack.sim.requests.length;
    const headers = {
      "api-key": TOKEN,
      "x-goog-api-key": TOKEN,
      "x-custom": `prefix ${TOKEN} suffix`,
      "x-other-key": other.key,
    };
    const secretText = `my env: OPENAI_API_KEY=${rollout.key} OTHER=${other.key} TOKEN=${TOKEN} walk_rlk_ok`;
    const chat = await postJson(
      `${rollout.base_urls.openai}/chat/completions?api_key=${rollout.key}&token=${encodeURIComponent(TOKEN)}`,
      { messages: [{ role: "user", content: secretText }] },
      headers,
    );
    assert.equal(chat.status, 200, chat.text);
    const models = await fetch(
      `${rollout.base_urls.openai}/models?api_key=${rollout.key}&x=1&t=${encodeURIComponent(TOKEN)}`,
      { headers },
    );
    assert.equal(models.status, 200);
    const tokenize = await postJson(
      `${stack.gateway.url}/r/${rollout.id}/tokenize?k=${rollout.key}`,
      { prompt: secretText },
      headers,
    );
    assert.notEqual(tokenize.status, 404);
    const seen = upstreamSaw(from);
    assert.ok(!seen.includes(TOKEN), "the control token reached the upstream");
    assert.ok(!seen.includes(rollout.key.slice(4)), "a rollout key reached the upstream");
    assert.ok(!seen.includes(other.key.slice(4)), "another rollout's key reached the upstream");
    assert.ok(seen.includes("walk_rlk_ok"), "text that is no key is left alone");
    // The store keeps the redacted body too: an export carries no key.
    const calls = await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/calls`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const stored = await calls.text();
    assert.ok(!stored.includes(TOKEN) && !stored.includes(other.key.slice(4)), "the store kept a secret");
    assert.match(stored, /OPENAI_API_KEY=rlk_\*{32}/);
  });

  test("a pass-through query keeps only its secret-free parameters", async () => {
    // The sim records paths without their query: a stand-in upstream records the target as it arrived.
    const targets: string[] = [];
    const upstream = createServer((req, res) => {
      targets.push(req.url ?? "");
      res.writeHead(200, { "content-type": "application/json" }).end('{"object":"list","data":[]}');
    });
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    const gateway = await startGateway({
      upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      port: 0,
      dataDir: stack.dataDir + "-query",
      controlToken: TOKEN,
      requireKey: false,
    });
    try {
      const created = await fetch(`${gateway.url}/api/rollouts`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
        body: "{}",
      });
      const rollout = (await created.json()) as { id: string; key: string };
      const query = `api_key=${rollout.key}&x=1&t=${encodeURIComponent(TOKEN)}&k=${encodeURIComponent(rollout.key)}&y=2`;
      const res = await fetch(`${gateway.url}/r/${rollout.id}/v1/models?${query}`);
      assert.equal(res.status, 200);
      assert.deepEqual(targets, ["/v1/models?x=1&y=2"]);
    } finally {
      await gateway.close();
      await new Promise((resolve) => upstream.close(resolve));
    }
  });
});
