// A request rlgate refuses is still a call of its rollout: recorded with status `rejected`, the reason and the body
// as received, committed before the harness gets its error — one test per kind of refusal — and the gateway goes on.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { CallRecord } from "../store/records.ts";
import { fromSnakeCase } from "../util/json-case.ts";
import { createRollout, postJson, rolloutCalls, startStack, type CreatedRollout, type Stack } from "./helpers.ts";

describe("refused requests are recorded on their rollout", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ gateway: { bodyLimitBytes: 64 * 1024 } });
  });
  after(async () => {
    await stack?.close();
  });

  /** Sends one refused request into a fresh rollout; returns the answer and the rollout's only call. */
  async function refuse(
    path: string,
    body: string,
    expectStatus: number,
  ): Promise<{ rollout: CreatedRollout; json: any; call: CallRecord }> {
    const rollout = await createRollout(stack.gateway.url, { harness: "refusals" });
    const res = await postJson(`${stack.gateway.url}/r/${rollout.id}${path}`, body);
    assert.equal(res.status, expectStatus, res.text);
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(calls.length, 1, "the refused request is the rollout's one call");
    const call = calls[0]!;
    assert.equal(call.status, "rejected");
    assert.equal(call.rolloutId, rollout.id);
    assert.equal(call.tokenSource, "missing");
    assert.equal(call.promptTokenIds, null);
    assert.equal(call.requestForwarded, null, "nothing went upstream");
    assert.deepEqual(call.response, res.json, "the record holds the error the harness got");
    return { rollout, json: res.json, call };
  }

  test("malformed JSON: recorded with the body's text as received", async () => {
    const { call } = await refuse("/v1/chat/completions", '{"model": "m", "messages": [', 400);
    assert.equal(call.api, "chat.completions");
    assert.equal(call.requestReceived, '{"model": "m", "messages": [');
    assert.match(call.error!, /RLGATE_BAD_REQUEST: request body is not valid JSON/);
  });

  test("an invalid request (Messages without max_tokens): recorded with its body, answered in Anthropic's shape", async () => {
    const body = { model: "claude-x", messages: [{ role: "user", content: "hi" }] };
    const { call, json } = await refuse("/v1/messages", JSON.stringify(body), 400);
    assert.equal(json.type, "error");
    assert.equal(call.api, "messages");
    assert.equal(call.model, "claude-x");
    assert.deepEqual(call.requestReceived, body);
    assert.match(call.error!, /max_tokens/);
  });

  test("an untranslatable item (Responses item_reference): recorded, naming the item", async () => {
    const body = { model: "m", stream: true, input: [{ type: "item_reference", id: "msg_1" }] };
    const { call } = await refuse("/v1/responses", JSON.stringify(body), 400);
    assert.equal(call.api, "responses");
    assert.equal(call.stream, true);
    assert.match(call.error!, /item_reference/);
  });

  test("an unknown previous_response_id: recorded, saying why rlgate has none", async () => {
    const { call } = await refuse(
      "/v1/responses",
      JSON.stringify({ model: "m", input: "x", previous_response_id: "resp_gone" }),
      400,
    );
    assert.match(call.error!, /Previous response with id 'resp_gone' not found/);
  });

  test("a body over --body-limit: recorded without the body, with the limit in the reason", async () => {
    const { call } = await refuse(
      "/v1/chat/completions",
      JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(100_000) }] }),
      413,
    );
    assert.equal(call.requestReceived, null);
    assert.match(call.error!, /RLGATE_BODY_TOO_LARGE/);
  });

  test("an unattributed refusal is recorded among the unattributed calls", async () => {
    const res = await postJson(`${stack.gateway.url}/v1/chat/completions`, "not json");
    assert.equal(res.status, 400);
    const unattributed = fromSnakeCase<{ calls: CallRecord[] }>(
      await (await fetch(`${stack.gateway.url}/api/calls`)).json(),
    ).calls;
    assert.ok(unattributed.some((c) => c.status === "rejected" && c.requestReceived === "not json"));
  });

  test("after a refusal the rollout takes calls as before, and its trajectories hold only the answered one", async () => {
    const { rollout } = await refuse("/v1/chat/completions", "{", 400);
    const ok = await postJson(`${rollout.base_urls.openai}/chat/completions`, {
      model: "Qwen/Qwen3-8B",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.equal(ok.status, 200, ok.text);
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.deepEqual(
      calls.map((c) => c.status),
      ["rejected", "ok"],
    );
    await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
    const rec = (await (await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/trajectories`)).json()) as any;
    assert.equal(rec.trajectories.length, 1);
  });

  test("GET and HEAD on a rollout's base URLs answer a harness's connectivity check; an unknown rollout's do not", async () => {
    const rollout = await createRollout(stack.gateway.url, {});
    for (const base of [rollout.base_urls.anthropic, rollout.base_urls.openai]) {
      const get = await fetch(base);
      assert.equal(get.status, 200, base);
      assert.deepEqual(await get.json(), { object: "rlgate.rollout", id: rollout.id, ok: true });
      assert.equal((await fetch(base, { method: "HEAD" })).status, 200, base);
    }
    assert.equal((await fetch(`${stack.gateway.url}/r/r_unknown`)).status, 404);
    assert.equal((await rolloutCalls(stack.gateway.url, rollout.id)).length, 0, "a check is not a call");
  });
});
