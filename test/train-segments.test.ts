// Agent-aware segments and which of them train, through the gateway and the simulated vLLM: an OpenCode-like session
// whose title call comes first (no tools, its own system prompt, a short answer) keeps the agent as `main` and the
// title call as `auxiliary`; a rollout's metadata `train_segments` decides what trains; bad settings get a sentence.
import assert from "node:assert/strict";
import { once } from "node:events";
import { after, before, describe, test } from "node:test";
import { createRollout, postJson, spawnCli, startStack, TOOLS, type Stack } from "./helpers.ts";

async function session(stack: Stack, metadata: Record<string, unknown> = {}): Promise<any> {
  const rollout = await createRollout(stack.gateway.url, { group: "segments", harness: "opencode-like", metadata });
  const url = `${rollout.base_urls.openai}/chat/completions`;
  const user = { role: "user", content: "List the files here and tell me how many there are." };
  const title = await postJson(url, {
    messages: [{ role: "system", content: "Generate a short title for the conversation." }, user],
    max_tokens: 64,
  });
  assert.equal(title.status, 200, title.text);
  const messages: Array<Record<string, unknown>> = [
    { role: "system", content: "You are an agent. Use the tools." },
    user,
  ];
  for (let turn = 0; turn < 3; turn++) {
    const res = await postJson(url, { messages, tools: TOOLS });
    assert.equal(res.status, 200, res.text);
    const message = res.json.choices[0].message;
    messages.push({
      role: "assistant",
      content: message.content,
      reasoning: message.reasoning,
      tool_calls: message.tool_calls?.length ? message.tool_calls : undefined,
    });
    for (const call of message.tool_calls ?? [])
      messages.push({ role: "tool", tool_call_id: call.id, content: "a.txt\nb.txt" });
  }
  await postJson(`${stack.gateway.url}/api/rollouts/${rollout.id}/finish`, { reward: 1 });
  return (await fetch(`${stack.gateway.url}/api/rollouts/${rollout.id}/trajectories`)).json();
}

describe("segments and --train-segments", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.close();
  });

  test("a title call made first is auxiliary; the agent is main and trains", async () => {
    const rec = await session(stack);
    assert.deepEqual(
      rec.segments.map((s: any) => [s.kind, s.trained]),
      [
        ["auxiliary", false],
        ["main", true],
      ],
    );
    assert.deepEqual(
      rec.calls.map((c: any) => c.attach.kind),
      ["auxiliary", "root", "extend", "extend"],
    );
    assert.deepEqual(rec.breaks, []);
    assert.equal(rec.flags.flagged, false);
    const main = rec.trajectories.find((t: any) => t.segment === "main");
    assert.equal(main.trained, true);
    const title = rec.trajectories.find((t: any) => t.segment === "auxiliary");
    assert.deepEqual([...new Set(title.spans.map((s: any) => s.kind))], ["untrained"]);
    assert.equal(rec.stats.retained_trajectories, 1);
  });

  test("in tokens prompt mode too: the title call is auxiliary, the agent main (tools counted from the harness's request)", async () => {
    const tokens = await startStack({ gateway: { prompts: "tokens" } });
    try {
      const rec = await session(tokens);
      assert.deepEqual(
        rec.segments.map((s: any) => [s.kind, s.trained]),
        [
          ["auxiliary", false],
          ["main", true],
        ],
      );
      assert.deepEqual(rec.breaks, []);
      assert.equal(rec.stats.retained_trajectories, 1);
    } finally {
      await tokens.close();
    }
  });

  test("a rollout's metadata train_segments decides which segments train", async () => {
    const rec = await session(stack, { train_segments: ["main", "auxiliary"] });
    assert.ok(rec.trajectories.every((t: any) => t.trained));
    assert.equal(rec.stats.trained_tokens, rec.stats.sampled_tokens);
  });

  test("bad train_segments: the control API answers 400 naming the kinds", async () => {
    const res = await postJson(`${stack.gateway.url}/api/rollouts`, {
      metadata: { train_segments: "main,everything" },
    });
    assert.equal(res.status, 400);
    assert.match(res.text, /train_segments.*main, sub_agent, compaction, auxiliary/);
  });

  test("rlgate serve --train-segments with an unknown kind exits with a sentence", async () => {
    const cli = spawnCli(["serve", "--port", "0", "--train-segments", "main,helpers"]);
    const [code] = (await once(cli.child, "exit")) as [number | null];
    assert.notEqual(code, 0);
    assert.match(cli.output(), /train segments are a list of main, sub_agent, compaction, auxiliary/);
  });
});
