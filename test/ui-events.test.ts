// The live UI's gateway routes without a browser: the page and its assets, the event stream of committed rollouts and
// calls, token texts, and the control token on every data route.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { collectSse as collect, playAgent, startStack, type Stack } from "./helpers.ts";

const TOKEN = "ui-events-token";
const auth = { authorization: `Bearer ${TOKEN}` };

describe("live UI routes", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ gateway: { controlToken: TOKEN } });
  });
  after(() => stack?.close());

  test("the page and its assets are served with a strict content security policy; unknown assets are 404", async () => {
    const redirect = await fetch(`${stack.gateway.url}/ui`, { redirect: "manual" });
    assert.equal(redirect.status, 308);
    assert.equal(redirect.headers.get("location"), "/ui/");
    const page = await fetch(`${stack.gateway.url}/ui/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type")!, /text\/html/);
    assert.match(page.headers.get("content-security-policy")!, /default-src 'self'/);
    assert.match(await page.text(), /<script type="module" src="main.js"><\/script>/);
    for (const asset of ["main.js", "dom.js", "style.css"])
      assert.equal((await fetch(`${stack.gateway.url}/ui/${asset}`)).status, 200, asset);
    // Assets are looked up by name among the files read at start: no path reaches beyond them.
    // An encoded separator never reaches the UI's routes: the gateway refuses the path (gateway/server.ts).
    const outside = await fetch(`${stack.gateway.url}/ui/..%2Fpackage.json`);
    assert.equal(outside.status, 400);
    const unknown = await fetch(`${stack.gateway.url}/ui/secrets.txt`);
    assert.equal(unknown.status, 404);
  });

  test("the data routes need the control token", async () => {
    for (const [path, init] of [
      ["/api/events", {}],
      ["/api/decode", { method: "POST", body: '{"ids":[1]}' }],
    ] as const) {
      const res = await fetch(`${stack.gateway.url}${path}`, init);
      assert.equal(res.status, 401, path);
      assert.match(((await res.json()) as any).error.message, /Authorization: Bearer <token>/);
      const wrong = await fetch(`${stack.gateway.url}${path}`, { ...init, headers: { authorization: "Bearer nope" } });
      assert.equal(wrong.status, 401);
      await wrong.body?.cancel();
    }
  });

  test("the event stream carries a rollout's creation, each committed call and its finish, never the rollout's key", async () => {
    const stream = await fetch(`${stack.gateway.url}/api/events`, { headers: auth });
    assert.equal(stream.status, 200);
    assert.match(stream.headers.get("content-type")!, /text\/event-stream/);
    const done = collect(stream, (events) => events.filter((e) => e.event === "rollout").length >= 2);
    const created = await fetch(`${stack.gateway.url}/api/rollouts`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: '{"group":"g-ui","harness":"h"}',
    });
    const rollout = (await created.json()) as any;
    await playAgent(rollout.base_urls.openai, 2, true, { authorization: `Bearer ${rollout.key}` });
    await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: '{"reward":1}',
    });
    const events = await done;
    const kinds = events.map((e) => `${e.event}:${e.data.status}`);
    assert.deepEqual(kinds, ["hello:undefined", "rollout:open", "call:ok", "call:ok", "rollout:ok"]);
    const calls = events.filter((e) => e.event === "call").map((e) => e.data);
    assert.ok(
      calls.every(
        (c) =>
          c.rollout_id === rollout.id &&
          c.prompt_tokens > 0 &&
          c.sampled_tokens > 0 &&
          typeof c.timings.overhead_ms === "number",
      ),
    );
    assert.ok(
      calls.every((c) => c.request_received === undefined),
      "bodies stay out of the stream",
    );
    assert.ok(
      events.every((e) => !JSON.stringify(e.data).includes(rollout.key)),
      "the key never travels",
    );
  });

  test("token texts for the token view; bad bodies get a 400 that says what is expected", async () => {
    const tok = qwen3Tokenizer();
    const ids = tok.encode("héllo <think>");
    const res = await fetch(`${stack.gateway.url}/api/decode`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ ids }),
    });
    assert.equal(res.status, 200);
    const { texts } = (await res.json()) as { texts: Record<string, string> };
    assert.deepEqual(
      ids.map((id) => texts[id]),
      ids.map((id) => tok.decode([id])),
    );
    for (const body of ["not json", '{"ids":"1"}', '{"ids":[-1]}']) {
      const bad = await fetch(`${stack.gateway.url}/api/decode`, { method: "POST", headers: auth, body });
      assert.equal(bad.status, 400, body);
      assert.match(((await bad.json()) as any).error.message, /ids/);
    }
  });
});
