// Branch replays on the Responses surface, read by the official SDK (openai): a branch's streamed calls before its
// point get the backbone's responses as Responses event streams (the events the gateway's encoder sends, each item's
// text in one delta), with the same response, item and call ids; only the decision call goes upstream.
import OpenAI from "openai";
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { AGENT_SCRIPT, createRollout, postJson, rolloutCalls, startStack, type Stack } from "./helpers.ts";

const TOOLS: OpenAI.Responses.FunctionTool[] = [
  {
    type: "function",
    name: "run_shell_command",
    description: "Run a shell command",
    parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    strict: false,
  },
];

interface Turn {
  response: OpenAI.Responses.Response;
  /** Event types, a run of one type counted once (deltas are cut where the upstream's tokens fell). */
  types: string[];
  sequence: number[];
}

/** A Codex-like agent: keeps its own history (store: false), streams every call, answers each function call. */
async function agent(baseURL: string): Promise<Turn[]> {
  const client = new OpenAI({ baseURL, apiKey: "sk-test", maxRetries: 0 });
  const input: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: "How many files are here?" }];
  const turns: Turn[] = [];
  for (let turn = 0; turn < 5; turn++) {
    const stream = client.responses.stream({ model: "gpt-5-codex", input, tools: TOOLS, store: false });
    const types: string[] = [];
    const sequence: number[] = [];
    for await (const event of stream) {
      if (types.at(-1) !== event.type) types.push(event.type);
      sequence.push(event.sequence_number);
    }
    const response = await stream.finalResponse();
    turns.push({ response, types, sequence });
    input.push(...(response.output as OpenAI.Responses.ResponseInputItem[]));
    const calls = response.output.filter((item) => item.type === "function_call");
    if (calls.length === 0) break;
    for (const call of calls)
      input.push({ type: "function_call_output", call_id: call.call_id, output: `out ${turn}` });
  }
  return turns;
}

describe("branch replays on the Responses surface (streamed)", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { script: AGENT_SCRIPT }, gateway: { modelMap: "gpt-*=Qwen/Qwen3-8B" } });
  });
  after(() => stack.close());

  test("the SDK reads the backbone's responses from the rebuilt event streams, ids and all", async () => {
    const url = stack.gateway.url;
    const backbone = await createRollout(url, {});
    const first = await agent(backbone.base_urls.openai);
    assert.equal(first.length, 3);
    assert.equal((await postJson(`${url}/api/rollouts/${backbone.id}/finish`, { reward: 1 })).status, 200);
    const branch = await createRollout(url, { branch: { of: backbone.id, at_call: 2 } });
    const before = stack.sim.stats.requests;
    const again = await agent(branch.base_urls.openai);
    assert.equal(stack.sim.stats.requests - before, 1, "only the decision call went upstream");
    for (let i = 0; i < 2; i++) {
      assert.deepEqual(again[i]!.response, first[i]!.response, `call ${i}: the same response`);
      assert.deepEqual(again[i]!.types, first[i]!.types, `call ${i}: the same events, in order`);
      assert.deepEqual(
        again[i]!.sequence,
        again[i]!.sequence.map((_, k) => k),
      );
    }
    const calls = await rolloutCalls(url, branch.id);
    assert.deepEqual(
      calls.map((c) => c.replayOf !== undefined),
      [true, true, false],
    );
    assert.equal((await rolloutCalls(url, branch.id)).length, 3);
    assert.equal((await (await fetch(`${url}/api/rollouts/${branch.id}`)).json()).metadata.branch.divergence, null);
  });
});
