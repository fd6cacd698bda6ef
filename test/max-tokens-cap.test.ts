// `serve --max-tokens-cap auto|N` and the built-in sim's context length: a harness's max_tokens default (Qwen Code
// 32768, Claude Code 32000) on top of its prompt must not fail a call that would fit once lowered.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, describe, test } from "node:test";
import type { CallRecord } from "../store/records.ts";
import { rmSync } from "node:fs";
import { createRollout, postJson, rolloutCalls, spawnCli, startStack, tempDir, type Stack } from "./helpers.ts";

const CONTEXT = 4096;
const MODEL = "Qwen/Qwen3-8B";
const ASK = { model: MODEL, max_tokens: 32_000, messages: [{ role: "user", content: "hello there" }] };

describe("--max-tokens-cap", () => {
  const stacks: Stack[] = [];
  after(async () => {
    for (const stack of stacks) await stack.close();
  });

  async function callWith(
    cap: "auto" | number | null,
    path: string,
    body: unknown,
  ): Promise<{ status: number; text: string; call: CallRecord }> {
    const stack = await startStack({ sim: { maxModelLen: CONTEXT }, gateway: { maxTokensCap: cap } });
    stacks.push(stack);
    const rollout = await createRollout(stack.gateway.url, {});
    const res = await postJson(`${stack.gateway.url}/r/${rollout.id}${path}`, body);
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    return { status: res.status, text: res.text, call: call! };
  }

  test("off (the default): the upstream refuses what does not fit, and the call records its error", async () => {
    const { status, call } = await callWith(null, "/v1/chat/completions", ASK);
    assert.equal(status, 400);
    assert.equal(call.status, "upstream_error");
    assert.equal(call.maxTokensCap, undefined);
  });

  test("auto: max_tokens becomes the context minus the prompt (counted by the upstream), recorded on the call", async () => {
    const { status, text, call } = await callWith("auto", "/v1/chat/completions", ASK);
    assert.equal(status, 200, text);
    assert.equal(call.status, "ok");
    const prompt = call.promptTokenIds!.length;
    assert.deepEqual(call.maxTokensCap, {
      requested: 32_000,
      sent: CONTEXT - prompt,
      contextLength: CONTEXT,
      promptTokens: prompt,
    });
    assert.equal((call.requestForwarded as any).max_tokens, CONTEXT - prompt);
    assert.equal((call.requestReceived as any).max_tokens, 32_000, "the harness's request is recorded as it was sent");
  });

  test("auto on Messages: Claude Code's 32000 fits once lowered; a request that fits is left alone", async () => {
    const messages = { model: MODEL, max_tokens: 32_000, messages: [{ role: "user", content: "hi" }] };
    const capped = await callWith("auto", "/v1/messages", messages);
    assert.equal(capped.status, 200, capped.text);
    assert.equal(capped.call.maxTokensCap!.requested, 32_000);
    const fits = await callWith("auto", "/v1/messages", { ...messages, max_tokens: 100 });
    assert.equal(fits.status, 200, fits.text);
    assert.equal(fits.call.maxTokensCap, undefined);
    assert.equal((fits.call.requestForwarded as any).max_tokens, 100);
  });

  test("N: a larger max_tokens is lowered to N, a smaller one kept", async () => {
    const { status, call } = await callWith(256, "/v1/chat/completions", ASK);
    assert.equal(status, 200);
    assert.deepEqual(call.maxTokensCap, { requested: 32_000, sent: 256, contextLength: null, promptTokens: null });
  });
});

describe("serve's sim context and cap options", () => {
  test("--help explains them; a bad --max-tokens-cap is refused with a sentence", () => {
    const help = spawnSync(process.execPath, ["--import", "tsx", "cli/index.ts", "serve", "--help"], {
      encoding: "utf8",
    });
    assert.match(help.stdout, /--sim-max-model-len/);
    assert.match(help.stdout, /--max-tokens-cap <auto\|N>/);
    const bad = spawnSync(process.execPath, ["--import", "tsx", "cli/index.ts", "serve", "--max-tokens-cap", "lots"], {
      encoding: "utf8",
    });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /expected 'auto' or a positive integer, got 'lots'/);
  });

  let serve: ReturnType<typeof spawnCli> | undefined;
  const dataDir = tempDir("serve-ctx");
  after(async () => {
    await serve?.kill("SIGTERM");
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("`rlgate serve` (as npm start runs it) gives the sim a 131072-token context", async () => {
    serve = spawnCli(["serve", "--port", "0", "--grpc-port", "0", "--data", dataDir]);
    const [, url] = await serve.waitFor(/listening on (http:\/\/\S+)/, 60_000);
    await serve.waitFor(/131072-token context/);
    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { max_model_len: number }[] };
    assert.equal(models.data[0]!.max_model_len, 131_072);
  });
});
