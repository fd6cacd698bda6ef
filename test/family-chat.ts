// What the chat-format family tests (prompts-<family>.test.ts) share: a chat call through the gateway, streamed or
// not, read back as one assistant message, and the changes a harness makes when it echoes an answer.
import assert from "node:assert/strict";
import { once } from "node:events";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ScriptTurn } from "../sim/index.ts";
import type { CallRecord } from "../store/records.ts";
import type { ModelFiles } from "../tokenizer/model-format.ts";
import {
  createRollout,
  postJson,
  readSse,
  rolloutCalls,
  spawnCli,
  streamedMessage,
  tempDir,
  type Stack,
} from "./helpers.ts";

type Json = Record<string, any>;

/** A harness's shell tool, as the family tests offer it. */
export const SHELL_TOOLS = [
  {
    type: "function",
    function: {
      name: "run_shell_command",
      description: "Run a shell command",
      parameters: {
        type: "object",
        properties: { command: { type: "string" }, timeout: { type: "integer" } },
        required: ["command"],
      },
    },
  },
];

/** The assistant message a stream's deltas add up to: reasoning under either name, an empty content as null. */
export function assemble(events: unknown[]): Json {
  const { content, reasoning, tool_calls } = streamedMessage(events);
  return { role: "assistant", content: content || null, tool_calls, ...(reasoning !== null ? { reasoning } : {}) };
}

/** One chat call at `base` (an OpenAI base URL), its answer's message. */
export async function chat(base: string, body: Json): Promise<Json> {
  if (body.stream) {
    const res = await fetch(`${base}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200);
    return assemble(await readSse(res));
  }
  const res = await postJson(`${base}/chat/completions`, body);
  assert.equal(res.status, 200, res.text);
  return res.json.choices[0].message;
}

/** How harnesses echo an answer: content trimmed or with a newline more, arguments re-serialized. */
export function echo(random: () => number, answer: Json): Json {
  const content: string | null = answer.content;
  const r = random();
  return {
    role: "assistant",
    content: content === null ? null : r < 0.4 ? content.trim() : r < 0.7 ? `${content}\n` : content,
    tool_calls: (answer.tool_calls ?? []).map((call: Json) => ({
      ...call,
      function: { ...call.function, arguments: JSON.stringify(JSON.parse(call.function.arguments)) },
    })),
  };
}

/**
 * A harness session over a family's scripted turns: each answer's calls are the script's (`check` says what else its
 * answer holds), echoed back as harnesses do with the calls' results, or "Go on." after a text answer. The calls
 * must all be served from the upstream's ids; the rollout is finished with reward 1.
 */
export async function scriptedSession(
  stack: Stack,
  random: () => number,
  turns: readonly ScriptTurn[],
  options: { body?: Json; check: (answer: Json, expected: ScriptTurn, stream: boolean) => void },
): Promise<{ calls: CallRecord[]; stats: Json; messages: Json[] }> {
  const rollout = await createRollout(stack.gateway.url);
  const messages: Json[] = [
    { role: "system", content: "You are an agent." },
    { role: "user", content: "Do the task." },
  ];
  for (const expected of turns) {
    const stream = random() < 0.5;
    // The sim answers any model name; the gateway forwards the harness's.
    const body = { model: "Qwen/Qwen3-8B", messages, tools: SHELL_TOOLS, stream, ...options.body };
    const answer = await chat(rollout.base_urls.openai, body);
    assert.deepEqual(
      (answer.tool_calls ?? []).map((c: Json) => [c.function.name, JSON.parse(c.function.arguments)]),
      (expected.tool_calls ?? []).map((c) => [c.name, c.arguments]),
    );
    options.check(answer, expected, stream);
    messages.push(echo(random, answer));
    for (const call of answer.tool_calls ?? [])
      messages.push({ role: "tool", tool_call_id: call.id, content: `out of ${call.function.arguments}` });
    if (!answer.tool_calls?.length) messages.push({ role: "user", content: "Go on." });
  }
  const calls = await rolloutCalls(stack.gateway.url, rollout.id);
  assert.equal(calls.length, turns.length);
  for (const call of calls) assert.equal(call.tokenSource, "upstream", call.tokenIssue ?? "");
  const finished = await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
  return { calls, stats: finished.json.trajectories.stats, messages };
}

/** A session reconstructed as one trajectory: no break, every sampled token trained once, amplification ~1. */
export function assertOneTrajectory(stats: Json): void {
  assert.equal(stats.retained_trajectories, 1, JSON.stringify(stats));
  assert.equal(
    Object.values(stats.breaks as Record<string, number>).reduce((a, b) => a + b, 0),
    0,
  );
  assert.equal(stats.trained_tokens, stats.sampled_tokens);
  assert.ok(stats.amplification <= 1.02, `amplification ${stats.amplification}`);
}

/**
 * One streamed call to a gateway in front of the built-in sim, whose policy answers a shell tool with
 * `echo rlgate-sim`: the answer is that call alone, served from tokens; its record.
 */
export async function simShellCall(url: string): Promise<CallRecord> {
  const rollout = await createRollout(url);
  const answer = await chat(rollout.base_urls.openai, {
    model: "Qwen/Qwen3-8B",
    messages: [{ role: "user", content: "list the files" }],
    tools: SHELL_TOOLS,
    stream: true,
  });
  assert.equal(answer.content, null);
  assert.equal(answer.tool_calls[0].function.name, "run_shell_command");
  assert.equal(JSON.parse(answer.tool_calls[0].function.arguments).command, "echo rlgate-sim");
  const [call] = await rolloutCalls(url, rollout.id);
  assert.equal(call!.prompt?.mode, "tokens");
  return call!;
}

/**
 * `rlgate serve --prompts tokens --model-dir DIR` (one worker, the built-in sim) over a family's Hugging Face files,
 * once its banner names the family's tool parser; `run` gets its URL, then the gateway is stopped.
 */
export async function withModelDirServe(
  files: ModelFiles,
  banner: RegExp,
  run: (url: string) => Promise<void>,
  config?: Record<string, unknown>,
): Promise<void> {
  const dir = tempDir("model");
  const data = tempDir("store");
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(files.tokenizerJSON));
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(files.tokenizerConfig));
  writeFileSync(join(dir, "generation_config.json"), JSON.stringify(files.generationConfig));
  if (config) writeFileSync(join(dir, "config.json"), JSON.stringify(config));
  const serve = spawnCli([
    "serve",
    ...["--port", "0", "--workers", "1", "--prompts", "tokens", "--model-dir", dir, "--data", data],
  ]);
  try {
    // Loading the tokenizer in the primary and the worker takes seconds alone, minutes on a loaded machine.
    const [, url] = await serve.waitFor(/listening on (http:\/\/\S+)/, 240_000);
    await serve.waitFor(banner);
    await run(url!);
  } finally {
    serve.child.kill("SIGTERM");
    await once(serve.child, "exit");
    for (const path of [dir, data]) rmSync(path, { recursive: true, force: true });
  }
}
