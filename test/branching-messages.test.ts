// Branch replays on the Anthropic Messages surface, read by the official SDK (@anthropic-ai/sdk): a branch's calls
// before its point get the backbone's messages, whole or as Anthropic's event stream, with the same ids.
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { backboneThenBranch } from "./branching-agent.ts";
import { AGENT_SCRIPT, startStack, type Stack } from "./helpers.ts";

const TOOLS = [
  {
    name: "run_shell_command",
    description: "Run a shell command",
    input_schema: { type: "object" as const, properties: { command: { type: "string" } }, required: ["command"] },
  },
];

/** A tool-using agent on the Messages API: each tool_use is answered with a tool_result, until a plain answer. */
async function agent(baseURL: string, stream: boolean): Promise<Anthropic.Message[]> {
  const client = new Anthropic({ baseURL, apiKey: "sk-ant-test", maxRetries: 0 });
  const messages: Anthropic.MessageParam[] = [{ role: "user", content: "How many files are here?" }];
  const answers: Anthropic.Message[] = [];
  for (let turn = 0; turn < 5; turn++) {
    const request = { model: "claude-sonnet-5-5", max_tokens: 512, messages, tools: TOOLS };
    const message = stream
      ? await client.messages.stream(request).finalMessage()
      : await client.messages.create(request);
    answers.push(message);
    messages.push({ role: "assistant", content: message.content });
    const uses = message.content.filter((b) => b.type === "tool_use");
    if (uses.length === 0) break;
    messages.push({
      role: "user",
      content: uses.map((u) => ({ type: "tool_result" as const, tool_use_id: u.id, content: `out ${turn}` })),
    });
  }
  return answers;
}

describe("branch replays on the Messages surface", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { script: AGENT_SCRIPT }, gateway: { modelMap: "claude-*=Qwen/Qwen3-8B" } });
  });
  after(() => stack.close());

  for (const stream of [false, true]) {
    test(`${stream ? "streamed" : "whole"}: the SDK reads the backbone's messages, ids and all; only the point goes upstream`, async () => {
      const run = await backboneThenBranch(
        stack,
        (r) => r.base_urls.anthropic,
        (base) => agent(base, stream),
      );
      assert.equal(run.upstreamRequests, 1);
      assert.deepEqual(run.again.slice(0, 2), run.first.slice(0, 2));
      assert.deepEqual(run.replayed, [true, true, false]);
    });
  }
});
