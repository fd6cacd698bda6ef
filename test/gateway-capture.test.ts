// What the gateway records equals what the upstream sent, token for token; what the harness receives equals what the
// upstream would have sent it directly.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { renderChatIds } from "../tokenizer/chat-template.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import { TOOLS, createRollout, postJson, readSse, rolloutCalls, startStack, type Stack } from "./helpers.ts";

const MESSAGES = [
  { role: "system", content: "You are a careful coding agent." },
  { role: "user", content: "List the files in the current directory." },
];

/** Removes what legitimately differs between two responses to the same request (ids, timestamps). */
function comparable(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value), (key, v) =>
    key === "id" || key === "created" || key === "system_fingerprint" ? undefined : v,
  );
}

function asFloat32(values: number[]): number[] {
  return values.map((v) => Math.fround(v));
}

describe("chat completions capture", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { seed: 7 } });
  });
  after(async () => {
    await stack.close();
  });

  test("non-streamed: captured ids and logprobs equal the upstream's; harness gets the upstream's response", async () => {
    const rollout = await createRollout(stack.gateway.url, { group: "g", harness: "test" });
    const request = { model: "Qwen/Qwen3-8B", messages: MESSAGES, tools: TOOLS };

    const direct = await postJson(`${stack.sim.url}/v1/chat/completions`, {
      ...request,
      return_token_ids: true,
      logprobs: true,
    });
    const plain = await postJson(`${stack.sim.url}/v1/chat/completions`, request);
    const viaGateway = await postJson(`${rollout.base_urls.openai}/chat/completions`, request);
    assert.equal(viaGateway.status, 200, viaGateway.text);

    // The harness did not ask for token ids or logprobs: it gets exactly what the upstream would have sent it.
    assert.deepEqual(comparable(viaGateway.json), comparable(plain.json));
    assert.equal(viaGateway.json.prompt_token_ids, null);
    assert.equal(viaGateway.json.choices[0].token_ids, null);
    assert.equal(viaGateway.json.choices[0].logprobs, null);
    // The header is there, a non-negative number in ms with three decimals (Number(null) would pass a bare >= 0).
    const overhead = viaGateway.headers.get("x-rlgate-overhead-ms");
    assert.match(overhead ?? "(absent)", /^\d+\.\d{3}$/);

    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.ok(call);
    assert.equal(call.status, "ok");
    assert.equal(call.tokenSource, "upstream");
    assert.equal(call.stream, false);
    assert.deepEqual(call.promptTokenIds, direct.json.prompt_token_ids);
    // Production-shaped: the prompt is the real Qwen3 template rendering, tokenized by the real tokenizer.
    assert.deepEqual(call.promptTokenIds, renderChatIds(MESSAGES, { tools: TOOLS }));
    assert.deepEqual(call.choices[0]!.tokenIds, direct.json.choices[0].token_ids);
    const expectedLogprobs = direct.json.choices[0].logprobs.content.map((e: { logprob: number }) => e.logprob);
    assert.deepEqual(call.choices[0]!.logprobs, asFloat32(expectedLogprobs));
    assert.equal(call.choices[0]!.tokenIds.length, call.choices[0]!.logprobs!.length);
    // The default policy calls the shell tool: the sampled ids hold the hermes tool call and end with <|im_end|>.
    assert.equal(call.choices[0]!.finishReason, "tool_calls");
    const ids = call.choices[0]!.tokenIds;
    assert.equal(ids.at(-1), qwen3Tokenizer().imEndId);
    assert.match(qwen3Tokenizer().decode(ids), /<tool_call>\n\{"name": "run_shell_command"/);
    assert.deepEqual(call.requestReceived, request);
    // Forwarded = the harness's body plus the two fields (stored as that splice of the received bytes).
    assert.deepEqual(call.requestForwarded, { ...request, return_token_ids: true, logprobs: true });
  });

  test("streamed: chunk token ids are assembled exactly, and stripped from what the harness receives", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const request = { model: "Qwen/Qwen3-8B", messages: MESSAGES, stream: true };
    const direct = await postJson(`${stack.sim.url}/v1/chat/completions`, {
      ...request,
      stream: false,
      return_token_ids: true,
      logprobs: true,
    });

    const res = await fetch(`${rollout.base_urls.openai}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(request),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
    const events = await readSse(res);
    assert.equal(events.at(-1), "[DONE]");
    const chunks = events.slice(0, -1) as Array<Record<string, any>>;
    for (const chunk of chunks) {
      assert.equal(chunk.prompt_token_ids ?? null, null, "prompt_token_ids leaked to the harness");
      for (const choice of chunk.choices) {
        assert.equal(choice.token_ids ?? null, null, "token_ids leaked to the harness");
        assert.equal(choice.logprobs ?? null, null, "logprobs leaked to the harness");
      }
    }
    // Chunk for chunk what the upstream sends a harness that asked for nothing extra.
    const plain = await fetch(`${stack.sim.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(request),
    });
    assert.deepEqual(comparable(chunks), comparable((await readSse(plain)).slice(0, -1)));
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    assert.equal(text, direct.json.choices[0].message.content);

    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.ok(call);
    assert.equal(call.status, "ok");
    assert.equal(call.stream, true);
    assert.deepEqual(call.promptTokenIds, direct.json.prompt_token_ids);
    assert.deepEqual(call.choices[0]!.tokenIds, direct.json.choices[0].token_ids);
    assert.deepEqual(
      call.choices[0]!.logprobs,
      asFloat32(direct.json.choices[0].logprobs.content.map((e: { logprob: number }) => e.logprob)),
    );
    const assembled = call.response as Record<string, any>;
    assert.equal(assembled.choices[0].message.content, direct.json.choices[0].message.content);
    assert.ok(call.timings.firstToken !== null && call.timings.firstToken >= call.timings.start);
  });

  test("a harness that asks for token ids and logprobs gets them unchanged", async () => {
    const request = { messages: MESSAGES, stream: true, return_token_ids: true, logprobs: true, top_logprobs: 2 };
    const res = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(request),
    });
    const chunks = (await readSse(res)).slice(0, -1) as Array<Record<string, any>>;
    assert.ok(Array.isArray(chunks[0]!.prompt_token_ids));
    const ids = chunks.flatMap((c) => c.choices.flatMap((ch: any) => ch.token_ids ?? []));
    const direct = await postJson(`${stack.sim.url}/v1/chat/completions`, { ...request, stream: false });
    assert.deepEqual(ids, direct.json.choices[0].token_ids);
    const withLogprobs = chunks.flatMap((c) => c.choices.flatMap((ch: any) => ch.logprobs?.content ?? []));
    assert.equal(withLogprobs.length, ids.length);
    assert.equal(withLogprobs[0].top_logprobs.length, 2);
  });

  test("a tool-call round trip and n > 1 siblings are captured per choice", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const history = [
      ...MESSAGES,
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "run_shell_command", arguments: '{"command": "ls"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "README.md\npackage.json" },
    ];
    for (const stream of [false, true]) {
      const res = await fetch(`${rollout.base_urls.openai}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ messages: history, tools: TOOLS, n: 3, stream }),
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(calls.length, 2);
    const direct = await postJson(`${stack.sim.url}/v1/chat/completions`, {
      messages: history,
      tools: TOOLS,
      n: 3,
      return_token_ids: true,
      logprobs: true,
    });
    for (const call of calls) {
      assert.equal(call.choices.length, 3);
      assert.deepEqual(call.promptTokenIds, renderChatIds(history, { tools: TOOLS }));
      call.choices.forEach((choice, i) => {
        assert.equal(choice.index, i);
        assert.deepEqual(choice.tokenIds, direct.json.choices[i].token_ids);
        assert.equal(choice.logprobs!.length, choice.tokenIds.length);
      });
      const distinct = new Set(call.choices.map((c) => c.tokenIds.join(",")));
      assert.equal(distinct.size, 3, "n > 1 siblings should differ");
    }
  });

  test("unattributed calls are forwarded and recorded as unattributed", async () => {
    const before = ((await (await fetch(`${stack.gateway.url}/api/calls`)).json()) as { calls: unknown[] }).calls
      .length;
    const res = await postJson(`${stack.gateway.url}/v1/chat/completions`, { messages: MESSAGES });
    assert.equal(res.status, 200);
    const { calls } = (await (await fetch(`${stack.gateway.url}/api/calls`)).json()) as {
      calls: Array<{ rollout_id: unknown }>;
    };
    assert.equal(calls.length, before + 1);
    assert.equal(calls.at(-1)!.rollout_id, null);
  });
});
