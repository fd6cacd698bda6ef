// The completions surface, driven by the official SDK (openai): forwarded with token capture (choice-level
// `prompt_token_ids` / `token_ids`, `logprobs.token_logprobs`), answered as the upstream would have answered.
import OpenAI from "openai";
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { renderChat } from "../tokenizer/chat-template.ts";
import { createRollout, postJson, rolloutCalls, startStack, type CreatedRollout, type Stack } from "./helpers.ts";
import { asFloat32, assertCaptureEquals, upstreamAnswer, withoutKeys, type Json } from "./surfaces-helpers.ts";

const MODEL = "Qwen/Qwen3-8B";
// A rendered chat: the sim answers it like a chat turn (and ends with <|im_end|>).
const PROMPT = renderChat([{ role: "user", content: "Say hello." }]);

function client(rollout: CreatedRollout): OpenAI {
  return new OpenAI({ baseURL: rollout.base_urls.openai, apiKey: "sk-test", maxRetries: 0 });
}

const comparable = (value: unknown): unknown => withoutKeys(value, ["id", "created"]);

describe("completions surface (official SDK)", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { seed: 2 }, gateway: { modelMap: "davinci-*=Qwen/Qwen3-8B" } });
  });
  after(async () => {
    await stack.close();
  });

  test("non-streamed: captured ids and logprobs equal the upstream's; the harness gets the upstream's response", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const request = { model: MODEL, prompt: PROMPT, max_tokens: 64 };
    const completion = await client(rollout).completions.create(request);
    const plain = await postJson(`${stack.sim.url}/v1/completions`, request);
    assert.deepEqual(
      comparable(completion),
      comparable(plain.json),
      "exactly what the upstream sends a harness that asked for nothing extra",
    );
    assert.equal((completion.choices[0] as Json).token_ids, null);

    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(call!.api, "completions");
    assert.equal((call!.requestForwarded as Json).return_token_ids, true);
    assert.equal((call!.requestForwarded as Json).logprobs, 1);
    const answer = await upstreamAnswer(stack, call!, "/v1/completions");
    assertCaptureEquals(call!, answer);
    assert.equal(completion.choices[0]!.text, answer.choices[0].text);
  });

  test("streamed: chunk ids are assembled exactly and stripped from what the harness receives", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const stream = await client(rollout).completions.create({
      model: MODEL,
      prompt: PROMPT,
      max_tokens: 64,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        text += choice.text;
        const extra = choice as Json;
        assert.equal(extra.token_ids ?? null, null, "token_ids leaked to the harness");
        assert.equal(extra.prompt_token_ids ?? null, null, "prompt_token_ids leaked to the harness");
        assert.equal(choice.logprobs ?? null, null, "logprobs leaked to the harness");
      }
      usage = chunk.usage ?? usage;
    }
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    const answer = await upstreamAnswer(stack, call!, "/v1/completions");
    assertCaptureEquals(call!, answer);
    assert.equal(text, answer.choices[0].text);
    assert.equal(usage?.completion_tokens, call!.choices[0]!.tokenIds.length);
    assert.equal((call!.response as Json).choices[0].text, text);
  });

  test("a harness that asks for ids and top logprobs gets them; a token-id prompt and a mapped model work", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const ids = (await postJson(`${stack.sim.url}/tokenize`, { model: MODEL, prompt: PROMPT })).json.tokens as number[];
    const body = { model: "davinci-002", prompt: ids, max_tokens: 32, logprobs: 2, return_token_ids: true };
    const res = await postJson(`${rollout.base_urls.openai}/completions`, body);
    assert.equal(res.status, 200, res.text);
    const choice = res.json.choices[0];
    assert.deepEqual(choice.prompt_token_ids, ids);
    assert.equal(choice.token_ids.length, choice.logprobs.token_logprobs.length);
    assert.equal(Object.keys(choice.logprobs.top_logprobs[0]).length >= 2, true);
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal((call!.requestForwarded as Json).model, MODEL);
    assert.deepEqual(call!.promptTokenIds, ids);
    assert.deepEqual(call!.choices[0]!.tokenIds, choice.token_ids);
    assert.deepEqual(call!.choices[0]!.logprobs, asFloat32(choice.logprobs.token_logprobs));
  });

  test("a batch of different prompts is captured per choice and flagged: one record holds one prompt", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const res = await postJson(`${rollout.base_urls.openai}/completions`, {
      model: MODEL,
      prompt: ["Once upon a time", "In a galaxy"],
      max_tokens: 8,
    });
    assert.equal(res.status, 200);
    assert.equal(res.json.choices.length, 2);
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal(call!.choices.length, 2);
    assert.equal(call!.tokenSource, "missing");
    assert.match(call!.tokenIssue ?? "", /prompt/);
  });

  test("errors come in OpenAI's shape", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const missing = await postJson(`${rollout.base_urls.openai}/completions`, { model: MODEL });
    assert.equal(missing.status, 400);
    assert.equal(missing.json.error.param, "prompt");
    const unknown = await client(rollout)
      .completions.create({ model: "other-model", prompt: "x" })
      .then(
        () => null,
        (e: unknown) => e,
      );
    assert.ok(unknown instanceof OpenAI.NotFoundError);
    const calls = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.deepEqual(
      calls.map((c) => c.status),
      ["rejected", "upstream_error"],
      "the refusal is recorded too",
    );
    assert.match(calls[0]!.error!, /prompt/);
  });
});
