// The sim's SGLang flavour: SGLang's token-id fields (choice-level, only when asked), its refusal of ids on chat
// streams, its error shape, and streams whose deltas add up to the whole answer.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { renderChat, renderChatIds } from "../tokenizer/chat-template.ts";
import { startSim, type SimServer } from "./index.ts";
import { postJson, postSse, SHELL_TOOL } from "./test-helpers.ts";

const USER = [{ role: "user", content: "List the files here." }];
let sim: SimServer;

before(async () => {
  sim = await startSim({ port: 0, seed: 3, flavor: "sglang" });
});
after(() => sim.close());

describe("sim, SGLang flavour", () => {
  test("chat: choice-level prompt_token_ids / token_ids when asked, absent otherwise; the requested model is echoed", async () => {
    const asked = await postJson(`${sim.url}/v1/chat/completions`, {
      model: "any-name",
      messages: USER,
      tools: [SHELL_TOOL],
      return_token_ids: true,
      logprobs: true,
    });
    assert.equal(asked.status, 200);
    const choice = asked.body["choices"][0];
    assert.equal(asked.body["model"], "any-name");
    assert.deepEqual(choice["prompt_token_ids"], renderChatIds(USER, { tools: [SHELL_TOOL] }));
    assert.equal(choice["token_ids"].length, asked.body["usage"]["completion_tokens"]);
    assert.equal(choice["logprobs"]["content"].length, choice["token_ids"].length);
    assert.equal(choice["finish_reason"], "tool_calls");
    assert.match(choice["message"]["tool_calls"][0]["id"], /^call_[0-9a-f]{24}$/);
    assert.equal("prompt_token_ids" in asked.body, false, "no top-level prompt ids (that is vLLM's place)");

    const promptOnly = await postJson(`${sim.url}/v1/chat/completions`, {
      messages: USER,
      return_prompt_token_ids: true,
    });
    assert.ok(Array.isArray(promptOnly.body["choices"][0]["prompt_token_ids"]));
    assert.equal("token_ids" in promptOnly.body["choices"][0], false);

    const plain = await postJson(`${sim.url}/v1/chat/completions`, { messages: USER });
    assert.equal("token_ids" in plain.body["choices"][0], false);
    assert.equal(plain.body["choices"][0]["logprobs"], null);
    assert.equal(plain.body["model"], "default");
  });

  test("chat streams refuse id flags with SGLang's 400 and stream the same answer without ids", async () => {
    for (const flag of ["return_token_ids", "return_prompt_token_ids", "return_meta_info"]) {
      const refused = await postJson(`${sim.url}/v1/chat/completions`, { messages: USER, stream: true, [flag]: true });
      assert.equal(refused.status, 400);
      assert.deepEqual(Object.keys(refused.body).sort(), ["code", "message", "object", "param", "type"]);
      assert.equal(refused.body["object"], "error");
      assert.match(refused.body["message"], new RegExp(flag));
    }
    const whole = await postJson(`${sim.url}/v1/chat/completions`, { messages: USER, tools: [SHELL_TOOL] });
    const stream = await postSse(`${sim.url}/v1/chat/completions`, {
      messages: USER,
      tools: [SHELL_TOOL],
      stream: true,
      stream_options: { include_usage: true },
    });
    assert.equal(stream.done, true);
    const deltas = stream.chunks.flatMap((c) => c["choices"].map((ch: any) => ch["delta"]));
    const message = whole.body["choices"][0]["message"];
    assert.equal(deltas.map((d) => d["reasoning_content"] ?? "").join(""), message["reasoning_content"]);
    const args = deltas
      .flatMap((d) => d["tool_calls"] ?? [])
      .map((t: any) => t["function"]["arguments"])
      .join("");
    assert.equal(args, message["tool_calls"][0]["function"]["arguments"]);
    const finish = stream.chunks.flatMap((c) => c["choices"]).filter((ch: any) => ch["finish_reason"]);
    assert.equal(finish.length, 1);
    assert.equal(finish[0]["finish_reason"], "tool_calls");
    assert.equal(stream.chunks.at(-1)!["usage"]["completion_tokens"], whole.body["usage"]["completion_tokens"]);
  });

  test("completions stream ids: prompt ids on the first chunk, each chunk's ids its delta", async () => {
    const prompt = renderChat(USER);
    const whole = await postJson(`${sim.url}/v1/completions`, { prompt, max_tokens: 30, return_token_ids: true });
    const stream = await postSse(`${sim.url}/v1/completions`, {
      prompt,
      max_tokens: 30,
      return_token_ids: true,
      stream: true,
    });
    const choices = stream.chunks.flatMap((c) => c["choices"]);
    assert.deepEqual(choices[0]["prompt_token_ids"], whole.body["choices"][0]["prompt_token_ids"]);
    assert.equal("prompt_token_ids" in choices[1], false);
    assert.deepEqual(
      choices.flatMap((c: any) => c["token_ids"]),
      whole.body["choices"][0]["token_ids"],
    );
  });

  test("unknown routes answer FastAPI's 404", async () => {
    const res = await postJson(`${sim.url}/v1/nope`, {});
    assert.equal(res.status, 404);
    assert.deepEqual(res.body, { detail: "Not Found" });
  });
});
