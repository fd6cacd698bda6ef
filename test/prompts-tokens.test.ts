// `rlgate serve --prompts tokens` against the sim: random agent sessions give one trajectory per thread (every call
// that continues a thread starts with that thread's exact earlier ids), options the mode cannot honour fall back to
// messages mode (recorded and counted), sampling options reach the upstream, and threads survive a restart.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startGateway } from "../gateway/index.ts";
import type { ScriptTurn } from "../sim/index.ts";
import { seededRandom } from "../util/seeded-random.ts";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  createRollout,
  postJson,
  readSse,
  rolloutCalls,
  spawnCli,
  startStack,
  streamedMessage,
  tempDir,
  TOOLS,
  type Stack,
} from "./helpers.ts";
import { rmSync } from "node:fs";

type Json = Record<string, any>;

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  return prefix.length <= ids.length && prefix.every((id, i) => ids[i] === id);
}

async function chat(stack: Stack, base: string, body: Json): Promise<Json> {
  if (body.stream) {
    const res = await fetch(`${base}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200);
    return { role: "assistant", ...streamedMessage(await readSse(res), "reasoning") };
  }
  const res = await postJson(`${base}/chat/completions`, body);
  assert.equal(res.status, 200, res.text);
  return res.json.choices[0].message;
}

/** A random agent conversation: reasoning or not, text before tool calls, parallel calls, a final answer. */
function randomScript(random: () => number, turns: number): ScriptTurn[] {
  const script: ScriptTurn[] = [];
  for (let t = 0; t < turns; t++) {
    const turn: ScriptTurn = {};
    if (random() < 0.6) turn.reasoning = `Step ${t}: thinking ${Math.floor(random() * 1000)}.`;
    if (random() < 0.4) turn.content = random() < 0.5 ? `Let me check ${t}.` : `Text é 😀 ${t}`;
    const calls = t === turns - 1 ? 0 : 1 + Math.floor(random() * 3);
    if (calls)
      turn.tool_calls = Array.from({ length: calls }, (_, k) => ({
        name: "run_shell_command",
        arguments: { command: `ls ${t}-${k}` },
      }));
    if (!turn.content && !calls) turn.content = "Done.";
    script.push(turn);
  }
  return script;
}

/** How a harness echoes an answer: whitespace, trailing newline, reasoning and arguments as real harnesses do. */
function echo(random: () => number, answer: Json): Json {
  const out: Json = { role: "assistant" };
  const content: string | null = answer.content;
  const r = random();
  out.content =
    content === null ? (r < 0.5 ? null : "") : r < 0.3 ? content.trim() || null : r < 0.6 ? `${content}\n` : content;
  if (random() < 0.3 && answer.reasoning) out.reasoning = answer.reasoning;
  if (answer.tool_calls?.length) {
    out.tool_calls = answer.tool_calls.map((call: Json) => ({
      id: call.id,
      type: "function",
      function: {
        name: call.function.name,
        arguments: random() < 0.5 ? JSON.stringify(JSON.parse(call.function.arguments)) : call.function.arguments,
      },
    }));
  }
  return out;
}

describe("tokens prompt mode: random sessions", () => {
  test("every call that continues a thread starts with the thread's exact earlier ids: one trajectory, no break", async () => {
    for (let session = 0; session < 6; session++) {
      const random = seededRandom(1000 + session);
      const turns = 3 + Math.floor(random() * 4);
      const stack = await startStack({ sim: { script: randomScript(random, turns) }, gateway: { prompts: "tokens" } });
      try {
        const rollout = await createRollout(stack.gateway.url);
        const messages: Json[] = [
          { role: "system", content: "You are an agent." },
          { role: "user", content: `Task ${session}` },
        ];
        for (let t = 0; t < turns; t++) {
          const thinking = random();
          const body: Json = { model: "Qwen/Qwen3-8B", messages, tools: TOOLS, stream: random() < 0.5 };
          if (thinking < 0.3) body.chat_template_kwargs = { enable_thinking: false };
          const answer = await chat(stack, rollout.base_urls.openai, body);
          messages.push(echo(random, answer));
          for (const call of answer.tool_calls ?? [])
            messages.push({ role: "tool", tool_call_id: call.id, content: `out of ${call.function.arguments}` });
          if (!answer.tool_calls?.length && t < turns - 1) messages.push({ role: "user", content: "Go on." });
        }
        const calls = await rolloutCalls(stack.gateway.url, rollout.id);
        assert.equal(calls.length, turns);
        calls.forEach((call, i) => {
          assert.equal(call.status, "ok");
          assert.equal(call.tokenSource, "upstream", call.tokenIssue ?? "");
          assert.equal(call.prompt?.mode, "tokens");
          if (i === 0) return assert.equal(call.prompt?.newThread, "first_call");
          const previous = calls[i - 1]!;
          assert.deepEqual(call.prompt?.parent, { seq: previous.seq, choice: 0 }, `session ${session} call ${i}`);
          assert.equal(call.prompt?.thread, calls[0]!.seq);
          assert.ok(
            startsWith(call.promptTokenIds!, [...previous.promptTokenIds!, ...previous.choices[0]!.tokenIds]),
            `session ${session} call ${i}`,
          );
        });
        const finished = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
        const stats = finished.json.trajectories.stats;
        assert.equal(stats.retained_trajectories, 1);
        assert.equal(
          Object.values(stats.breaks as Record<string, number>).reduce((a, b) => a + b, 0),
          0,
        );
        assert.equal(stats.trained_tokens, stats.sampled_tokens);
        assert.ok(stats.amplification <= 1.02, `amplification ${stats.amplification}`);
      } finally {
        await stack.close();
      }
    }
  });
});

describe("tokens prompt mode: options", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { maxModelLen: 8192 }, gateway: { prompts: "tokens" } });
  });
  after(() => stack.close());

  const FALLBACKS: Array<[string, Json, string]> = [
    ["tool_choice required", { tool_choice: "required" }, "unsupported_option:tool_choice"],
    [
      "a named tool_choice",
      { tool_choice: { type: "function", function: { name: "run_shell_command" } } },
      "unsupported_option:tool_choice",
    ],
    ["response_format", { response_format: { type: "json_object" } }, "unsupported_option:response_format"],
    ["logprobs asked by the harness", { logprobs: true, top_logprobs: 2 }, "unsupported_option:logprobs"],
    ["return_token_ids asked by the harness", { return_token_ids: true }, "unsupported_option:return_token_ids"],
    [
      "a chat template switch other than thinking",
      { chat_template_kwargs: { custom: 1 } },
      "unsupported_option:chat_template_kwargs.custom",
    ],
    [
      "an image part",
      {
        messages: [
          { role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AA==" } }] },
        ],
      },
      "unsupported_content:non_text_part",
    ],
  ];
  for (const [name, fields, reason] of FALLBACKS) {
    test(`${name}: the call falls back to messages mode, recorded and counted`, async () => {
      const rollout = await createRollout(stack.gateway.url);
      const body = {
        model: "Qwen/Qwen3-8B",
        messages: [{ role: "user", content: "hi" }],
        tools: TOOLS,
        max_tokens: 64,
        ...fields,
      };
      const res = await postJson(`${rollout.base_urls.openai}/chat/completions`, body);
      assert.equal(res.status, 200, res.text);
      const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
      assert.deepEqual(call!.prompt, { mode: "messages", fallbackReason: reason });
      assert.equal(call!.path.endsWith("/chat/completions"), true);
      assert.ok(Array.isArray((call!.requestForwarded as Json).messages), "forwarded as chat");
      const metrics = await (await fetch(`${stack.gateway.url}/metrics`)).text();
      assert.match(
        metrics,
        new RegExp(
          `rlgate_prompt_mode_calls_total\\{mode="messages",reason="${reason.replace(/[.*]/g, "\\$&")}"\\} [1-9]`,
        ),
      );
    });
  }

  test("a history the template cannot render is served in messages mode, where the upstream answers it as it would", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const messages = [
      { role: "user", content: "hi" },
      { role: "assistant", content: null, tool_calls: [{ id: "x" }] },
      { role: "user", content: "?" },
    ];
    const res = await postJson(`${rollout.base_urls.openai}/chat/completions`, {
      model: "Qwen/Qwen3-8B",
      messages,
      max_tokens: 20,
    });
    assert.equal(res.status, 400, res.text);
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.deepEqual(call!.prompt, { mode: "messages", fallbackReason: "render_failed" });
    assert.equal(call!.status, "upstream_error");
  });

  test("sampling options reach /v1/completions with the rendered ids; n choices are each parsed", async () => {
    const rollout = await createRollout(stack.gateway.url);
    const sampling = {
      temperature: 0.6,
      top_p: 0.9,
      top_k: 20,
      min_p: 0.05,
      seed: 7,
      stop: ["never-stop"],
      max_tokens: 200,
      n: 2,
      presence_penalty: 0.1,
    };
    const res = await postJson(`${rollout.base_urls.openai}/chat/completions`, {
      model: "Qwen/Qwen3-8B",
      messages: [{ role: "user", content: "hi" }],
      ...sampling,
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.choices.length, 2);
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    const forwarded = call!.requestForwarded as Json;
    for (const [key, value] of Object.entries(sampling)) assert.deepEqual(forwarded[key], value, key);
    assert.deepEqual(forwarded.prompt, call!.promptTokenIds);
    assert.equal(forwarded.return_token_ids, true);
    assert.equal(call!.choices.length, 2);
    assert.equal(call!.prompt?.continuation?.length, 2);
    assert.equal(res.json.prompt_token_ids, null, "ids the harness did not ask for are not sent");
  });

  test("without max_tokens the rest of the upstream's context is asked for (not /v1/completions' 16)", async () => {
    const rollout = await createRollout(stack.gateway.url);
    await postJson(`${rollout.base_urls.openai}/chat/completions`, {
      model: "Qwen/Qwen3-8B",
      messages: [{ role: "user", content: "hi" }],
    });
    const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
    assert.equal((call!.requestForwarded as Json).max_tokens, 8192 - call!.promptTokenIds!.length);
  });
});

describe("tokens prompt mode: SGLang", () => {
  test("ids go to SGLang's /v1/completions as a token prompt and the thread continues, streamed or not", async () => {
    const stack = await startStack({
      sim: { flavor: "sglang" },
      gateway: { prompts: "tokens", upstreamFlavor: "sglang" },
    });
    try {
      const rollout = await createRollout(stack.gateway.url);
      const messages: Json[] = [{ role: "user", content: "list" }];
      for (const stream of [false, true]) {
        const answer = await chat(stack, rollout.base_urls.openai, {
          model: "Qwen/Qwen3-8B",
          messages,
          tools: TOOLS,
          stream,
        });
        messages.push({
          role: "assistant",
          content: answer.content,
          tool_calls: answer.tool_calls?.length ? answer.tool_calls : undefined,
        });
        for (const call of answer.tool_calls ?? [])
          messages.push({ role: "tool", tool_call_id: call.id, content: "a.txt" });
        if (!answer.tool_calls?.length) messages.push({ role: "user", content: "more" });
      }
      const [first, second] = await rolloutCalls(stack.gateway.url, rollout.id);
      assert.equal(first!.tokenSource, "upstream", first!.tokenIssue ?? "");
      assert.equal(second!.tokenSource, "upstream", second!.tokenIssue ?? "");
      assert.deepEqual(second!.prompt?.parent, { seq: first!.seq, choice: 0 });
      assert.ok(startsWith(second!.promptTokenIds!, [...first!.promptTokenIds!, ...first!.choices[0]!.tokenIds]));
    } finally {
      await stack.close();
    }
  });
});

describe("tokens prompt mode: restart", () => {
  test("a thread continues from its exact ids after the gateway restarts on the same store", async () => {
    const script: ScriptTurn[] = [
      {
        reasoning: "Look first.",
        content: "\n",
        tool_calls: [{ name: "run_shell_command", arguments: { command: "ls" } }],
      },
      { content: "Done." },
    ];
    const stack = await startStack({ sim: { script }, gateway: { prompts: "tokens" } });
    try {
      const rollout = await createRollout(stack.gateway.url);
      const messages: Json[] = [{ role: "user", content: "list" }];
      const first = await chat(stack, rollout.base_urls.openai, { model: "Qwen/Qwen3-8B", messages, tools: TOOLS });
      messages.push({ role: "assistant", content: first.content, tool_calls: first.tool_calls });
      messages.push({ role: "tool", tool_call_id: first.tool_calls[0].id, content: "a.txt" });

      const port = stack.gateway.port;
      await stack.gateway.close();
      stack.gateway = await startGateway({ upstream: stack.sim.url, port, dataDir: stack.dataDir, prompts: "tokens" });
      await chat(stack, rollout.base_urls.openai, { model: "Qwen/Qwen3-8B", messages, tools: TOOLS, stream: true });
      const [call1, call2] = await rolloutCalls(stack.gateway.url, rollout.id);
      assert.deepEqual(call2!.prompt?.parent, { seq: call1!.seq, choice: 0 });
      assert.ok(startsWith(call2!.promptTokenIds!, [...call1!.promptTokenIds!, ...call1!.choices[0]!.tokenIds]));
    } finally {
      await stack.close();
    }
  });

  test("messages that do not extend an earlier answer start a new thread that says why", async () => {
    const stack = await startStack({ gateway: { prompts: "tokens" } });
    try {
      const rollout = await createRollout(stack.gateway.url);
      const base = { model: "Qwen/Qwen3-8B", max_tokens: 50 };
      await postJson(`${rollout.base_urls.openai}/chat/completions`, {
        ...base,
        messages: [{ role: "user", content: "one" }],
      });
      await postJson(`${rollout.base_urls.openai}/chat/completions`, {
        ...base,
        messages: [
          { role: "user", content: "one" },
          { role: "assistant", content: "not what the model said" },
          { role: "user", content: "two" },
        ],
      });
      const unattributed = await postJson(`${stack.gateway.url}/v1/chat/completions`, {
        ...base,
        messages: [{ role: "user", content: "x" }],
      });
      assert.equal(unattributed.status, 200);
      const [first, second] = await rolloutCalls(stack.gateway.url, rollout.id);
      assert.equal(first!.prompt?.newThread, "first_call");
      assert.equal(second!.prompt?.newThread, "no_earlier_answer_matched");
      assert.equal(second!.prompt?.thread, second!.seq);
      const loose = (await (await fetch(`${stack.gateway.url}/api/calls`)).json()) as {
        calls: Array<{ prompt?: { new_thread?: string } }>;
      };
      assert.equal(loose.calls.at(-1)!.prompt?.new_thread, "unattributed");
    } finally {
      await stack.close();
    }
  });
});

describe("tokens prompt mode: failures", () => {
  test("an upstream error on the token prompt reaches the harness as the upstream sent it, recorded as failed", async () => {
    const stack = await startStack({ sim: { maxModelLen: 4096 }, gateway: { prompts: "tokens" } });
    try {
      const rollout = await createRollout(stack.gateway.url);
      const res = await postJson(`${rollout.base_urls.openai}/chat/completions`, {
        model: "Qwen/Qwen3-8B",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 5000,
      });
      assert.equal(res.status, 400);
      assert.match(res.json.error.message, /maximum context length is 4096/);
      const [call] = await rolloutCalls(stack.gateway.url, rollout.id);
      assert.equal(call!.status, "upstream_error");
      assert.equal(call!.prompt?.mode, "tokens");
      // A failed call leaves nothing to continue: the next call starts a thread afresh.
      await postJson(`${rollout.base_urls.openai}/chat/completions`, {
        model: "Qwen/Qwen3-8B",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 20,
      });
      const [, next] = await rolloutCalls(stack.gateway.url, rollout.id);
      assert.equal(next!.prompt?.newThread, "first_call");
    } finally {
      await stack.close();
    }
  });

  test("an upstream without a context length on /v1/models: calls without max_tokens fall back to messages mode", async () => {
    const stack = await startStack();
    // The sim behind a front that hides its model card.
    const front: Server = createServer(async (req, res) => {
      if (req.url?.startsWith("/v1/models")) return void res.writeHead(404).end();
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const answer = await fetch(`${stack.sim.url}${req.url}`, {
        method: req.method,
        headers: { "content-type": "application/json" },
        body: Buffer.concat(chunks),
      });
      res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
      res.end(Buffer.from(await answer.arrayBuffer()));
    });
    front.listen(0, "127.0.0.1");
    await once(front, "listening");
    const dataDir = tempDir("tokens-front");
    const gateway = await startGateway({
      upstream: `http://127.0.0.1:${(front.address() as AddressInfo).port}`,
      port: 0,
      dataDir,
      prompts: "tokens",
    });
    try {
      const rollout = await createRollout(gateway.url);
      const ask = { model: "Qwen/Qwen3-8B", messages: [{ role: "user", content: "hi" }] };
      assert.equal((await postJson(`${rollout.base_urls.openai}/chat/completions`, ask)).status, 200);
      assert.equal(
        (await postJson(`${rollout.base_urls.openai}/chat/completions`, { ...ask, max_tokens: 30 })).status,
        200,
      );
      const [without, withMax] = await rolloutCalls(gateway.url, rollout.id);
      assert.deepEqual(without!.prompt, { mode: "messages", fallbackReason: "context_length_unknown" });
      assert.equal(withMax!.prompt?.mode, "tokens");
    } finally {
      await gateway.close();
      front.close();
      await stack.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("rlgate serve --model-dir with a directory that is not a model says so in a sentence and exits 1", async () => {
    const cli = spawnCli(["serve", "--port", "0", "--prompts", "tokens", "--model-dir", "/nonexistent/model"]);
    const [code] = (await once(cli.child, "exit")) as [number | null];
    assert.equal(code, 1);
    assert.match(cli.output(), /rlgate: --model-dir \/nonexistent\/model: tokenizer\.json is missing/);
    assert.doesNotMatch(cli.output(), /at loadModelChatFormat/);
  });
});
