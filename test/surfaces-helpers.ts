// Shared by the API-surface tests: what the upstream generated for a call (asked again, directly, with the exact body
// rlgate forwarded: the sim is deterministic), and the check that a call's capture equals it token for token.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";
import type { ScriptTurn } from "../sim/index.ts";
import type { CallRecord } from "../store/records.ts";
import { postJson, readSse, startStack, type Stack } from "./helpers.ts";

export type Json = Record<string, any>;

export const SHELL_SCHEMA = {
  type: "object" as const,
  properties: { command: { type: "string", description: "the command" } },
  required: ["command"],
};

export function asFloat32(values: readonly number[]): number[] {
  return values.map((v) => Math.fround(v));
}

/** The upstream's own answer to the body rlgate forwarded for `call`, asked unstreamed with ids and logprobs. */
export async function upstreamAnswer(stack: Stack, call: CallRecord, path = "/v1/chat/completions"): Promise<Json> {
  const { stream: _stream, stream_options: _options, ...body } = call.requestForwarded as Json;
  const direct = await postJson(`${stack.sim.url}${path}`, { ...body, return_token_ids: true });
  assert.equal(direct.status, 200, direct.text);
  return direct.json;
}

/** Prompt ids, sampled ids and logprobs of choice 0 as the upstream reports them (vLLM or SGLang fields). */
export function upstreamTokens(answer: Json): { prompt: number[]; sampled: number[]; logprobs: number[] } {
  const choice = answer.choices[0];
  const logprobs = Array.isArray(choice.logprobs?.content)
    ? choice.logprobs.content.map((e: Json) => e.logprob)
    : choice.logprobs.token_logprobs;
  return { prompt: answer.prompt_token_ids ?? choice.prompt_token_ids, sampled: choice.token_ids, logprobs };
}

export function assertCaptureEquals(call: CallRecord, answer: Json, where = `call ${call.seq}`): void {
  const expected = upstreamTokens(answer);
  assert.equal(call.status, "ok", `${where}: ${call.error}`);
  assert.equal(call.tokenSource, "upstream", `${where}: ${call.tokenIssue}`);
  assert.deepEqual(call.promptTokenIds, expected.prompt, `${where}: prompt ids`);
  assert.equal(call.choices.length, 1, where);
  assert.deepEqual(call.choices[0]!.tokenIds, expected.sampled, `${where}: sampled ids`);
  assert.deepEqual(call.choices[0]!.logprobs, asFloat32(expected.logprobs), `${where}: logprobs`);
}

/** Runs a shell command for an agent loop, as a harness's shell tool would. */
export function runShell(command: string, cwd: string): string {
  return execFileSync("bash", ["-c", command], { cwd, encoding: "utf8", timeout: 10_000 });
}

/** Milliseconds from sending a streamed request to its first body byte, and to its end. */
export async function streamTiming(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ first: number; total: number; text: string }> {
  const start = performance.now();
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const reader = res.body!.getReader();
  let first = -1;
  let text = "";
  const decoder = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (first < 0) first = performance.now() - start;
    text += decoder.decode(value, { stream: true });
  }
  return { first, total: performance.now() - start, text };
}

/** The `event:` names of an SSE body, in order. */
export function eventNames(text: string): string[] {
  return text
    .split("\n")
    .filter((line) => line.startsWith("event: "))
    .map((line) => line.slice(7));
}

/** A JSON value without the keys that differ between two runs of one request (ids, timestamps). */
export function withoutKeys(value: unknown, keys: readonly string[]): unknown {
  const drop = new Set(keys);
  return JSON.parse(JSON.stringify(value), (key, v) => (drop.has(key) ? undefined : v));
}

/** POSTs a streamed request and reads its server-sent events (`[DONE]` as a string). */
export async function postStream(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; contentType: string; events: unknown[] }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, contentType: res.headers.get("content-type") ?? "", events: await readSse(res) };
}

/** A stack whose sim plays `script`, and a temp workspace for an agent loop's tools; both gone after the suite. */
export function useAgentLoop(
  script: ScriptTurn[],
  modelMap: string,
): { readonly stack: Stack; readonly workspace: string } {
  const fixture = { stack: undefined as unknown as Stack, workspace: "" };
  before(async () => {
    fixture.stack = await startStack({ sim: { script }, gateway: { modelMap } });
    fixture.workspace = mkdtempSync(join(tmpdir(), "rlgate-agent-loop-"));
  });
  after(async () => {
    await fixture.stack?.close();
    if (fixture.workspace) rmSync(fixture.workspace, { recursive: true, force: true });
  });
  return fixture;
}

/**
 * Every call of an agent loop holds the upstream's ids, and each prompt extends the previous call's turn exactly
 * (`path`: the upstream route the calls went to; /v1/completions in the tokens prompt mode).
 */
export async function assertLoopCaptured(stack: Stack, calls: CallRecord[], path?: string): Promise<void> {
  for (const call of calls) assertCaptureEquals(call, await upstreamAnswer(stack, call, path));
  for (let i = 1; i < calls.length; i++) {
    const turn = [...calls[i - 1]!.promptTokenIds!, ...calls[i - 1]!.choices[0]!.tokenIds];
    assert.deepEqual(
      calls[i]!.promptTokenIds!.slice(0, turn.length),
      turn,
      `call ${i} extends call ${i - 1} token for token`,
    );
  }
}

/** A streamed answer whose first byte arrived while the upstream was still generating (it took > 300 ms). */
export function assertFirstByteEarly(timing: { first: number; total: number }): void {
  assert.ok(timing.total > 300, `generation took ${timing.total} ms`);
  assert.ok(timing.first < timing.total / 3, `first byte after ${timing.first} ms of ${timing.total} ms`);
}

/** An agent loop's script: write `word` into proof.txt with the shell tool, check it, answer. */
export function proofScript(word: string): ScriptTurn[] {
  return [
    {
      reasoning: "I will write the proof file.",
      tool_calls: [{ name: "run_shell_command", arguments: { command: `echo ${word} > proof.txt` } }],
    },
    {
      reasoning: "Let me check it.",
      tool_calls: [{ name: "run_shell_command", arguments: { command: "cat proof.txt" } }],
    },
    { reasoning: "All done.", content: `proof.txt holds ${word}.` },
  ];
}
