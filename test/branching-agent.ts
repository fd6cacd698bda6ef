// The scripted client of the branching tests: a tool-using agent over the chat API, whole or streamed.
import assert from "node:assert/strict";
import {
  createRollout,
  postJson,
  readSse,
  rolloutCalls,
  streamedMessage,
  TOOLS,
  type CreatedRollout,
  type Stack,
} from "./helpers.ts";

export type Message = Record<string, any>;

/** A tool-using agent: posts its history, runs each tool call with `tool` (the environment), until a plain answer. */
export async function runAgent(
  baseUrl: string,
  tool: (turn: number) => string,
  options: { stream?: boolean; maxTurns?: number } = {},
): Promise<{ status: number; answers: Message[]; error?: string }> {
  const messages: Message[] = [
    { role: "system", content: "You are a coding agent." },
    { role: "user", content: "How many files are here?" },
  ];
  const answers: Message[] = [];
  for (let turn = 0; turn < (options.maxTurns ?? 6); turn++) {
    const res = await fetch(`${baseUrl}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages, tools: TOOLS, ...(options.stream ? { stream: true } : {}) }),
    });
    if (res.status !== 200) return { status: res.status, answers, error: await res.text() };
    const message = options.stream ? assemble(await readSse(res)) : ((await res.json()) as any).choices[0].message;
    answers.push(message);
    messages.push({ role: "assistant", content: message.content ?? null, tool_calls: message.tool_calls });
    if (!message.tool_calls?.length) break;
    for (const call of message.tool_calls) messages.push({ role: "tool", tool_call_id: call.id, content: tool(turn) });
  }
  return { status: 200, answers };
}

/** The message a chat stream carries (content, reasoning, whole tool calls), empty strings where none came. */
function assemble(events: unknown[]): Message {
  const { content, reasoning, tool_calls } = streamedMessage(events, "reasoning");
  return { content: content ?? "", reasoning: reasoning ?? "", tool_calls };
}

/** A tool whose output is the same in every run (the environment a branch replays in). */
export const stableTool = (turn: number) => `file${turn}.txt`;

export async function finish(url: string, id: string, reward: number | null, status = "ok"): Promise<void> {
  const r = await postJson(`${url}/api/rollouts/${id}/finish`, { reward, status });
  assert.equal(r.status, 200, r.text);
}

/** Two finished backbones of three calls each in group "g" (the scripted model), keyed by "false" / "true": streamed. */
export async function scriptedBackbones(url: string): Promise<Record<string, { id: string; answers: Message[] }>> {
  const backbones: Record<string, { id: string; answers: Message[] }> = {};
  for (const stream of [false, true]) {
    const r = await createRollout(url, { group: "g" });
    const run = await runAgent(r.base_urls.openai, stableTool, { stream });
    assert.equal(run.answers.length, 3);
    await finish(url, r.id, 1);
    backbones[String(stream)] = { id: r.id, answers: run.answers };
  }
  return backbones;
}

/**
 * A backbone run of an SDK-driven agent (three calls), finished, then a branch of it at call 2 run by the same agent:
 * both runs' answers, which of the branch's calls were replays, and how many requests the upstream got meanwhile.
 */
export async function backboneThenBranch<T>(
  stack: Stack,
  baseOf: (rollout: CreatedRollout) => string,
  agent: (base: string) => Promise<T[]>,
): Promise<{ first: T[]; again: T[]; replayed: boolean[]; upstreamRequests: number }> {
  const url = stack.gateway.url;
  const backbone = await createRollout(url, {});
  const first = await agent(baseOf(backbone));
  assert.equal(first.length, 3);
  await finish(url, backbone.id, 1);
  const branch = await createRollout(url, { branch: { of: backbone.id, at_call: 2 } });
  const before = stack.sim.stats.requests;
  const again = await agent(baseOf(branch));
  const upstreamRequests = stack.sim.stats.requests - before;
  const replayed = (await rolloutCalls(url, branch.id)).map((c) => c.replayOf !== undefined);
  return { first, again, replayed, upstreamRequests };
}
