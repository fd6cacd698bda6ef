// Branches cut at a token position (tokens prompt mode): the decision call's prompt upstream is the backbone call's
// prompt ids followed by its first sampled ids up to the position; the harness gets the kept text and the new
// continuation as one answer (whole and streamed; a tool call the cut falls inside still parses); the capture records
// the kept ids as prompt, so the branch's trajectory shares them with the backbone and trains only what it sampled.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { TOKEN } from "../tokenizer/token-text.ts";
import { finish, runAgent, scriptedBackbones, stableTool, type Message } from "./branching-agent.ts";
import { AGENT_SCRIPT, createRollout, postJson, rolloutCalls, startStack, type Stack } from "./helpers.ts";

async function trajectories(url: string, id: string): Promise<Array<{ token_ids: number[]; loss_mask: number[] }>> {
  return ((await (await fetch(`${url}/api/rollouts/${id}/trajectories`)).json()) as any).trajectories;
}

/** What the harness sees of an answer, tool-call ids aside (tokens mode draws new ones for a sampled call). */
function seen(message: Message) {
  return {
    content: message.content || null,
    reasoning: message.reasoning || null,
    calls: (message.tool_calls ?? []).map((c: any) => [c.function.name, c.function.arguments]),
  };
}

describe("branches at a token position (tokens mode, scripted model)", () => {
  let stack: Stack;
  let url: string;
  let backbones: Record<string, { id: string; answers: Message[] }> = {};

  before(async () => {
    stack = await startStack({ sim: { script: AGENT_SCRIPT }, gateway: { prompts: "tokens" } });
    url = stack.gateway.url;
    backbones = await scriptedBackbones(url);
  });
  after(() => stack.close());

  for (const stream of [false, true]) {
    test(`${stream ? "streamed" : "whole"}: cut inside a tool call, the prompt is the backbone's ids up to it and the call parses`, async () => {
      const backbone = backbones[String(stream)]!;
      const base = await rolloutCalls(url, backbone.id);
      const sampled = base[1]!.choices[0]!.tokenIds;
      assert.equal(base[1]!.prompt?.mode, "tokens");
      // Three tokens into the tool call (`<tool_call>`, "\n", `{"`): its name and arguments come after the cut.
      const atToken = sampled.indexOf(TOKEN.toolCallOpen) + 3;
      assert.ok(atToken > 3 && atToken < sampled.length);
      const branch = await createRollout(url, {
        group: "g",
        branch: { of: backbone.id, at_call: 1, at_token: atToken },
      });
      const before = stack.sim.requests.length;
      const run = await runAgent(branch.base_urls.openai, stableTool, { stream });
      assert.equal(run.status, 200, run.error);
      const upstream = stack.sim.requests.slice(before);
      assert.equal(upstream.length, 2, "call 0 replayed; the decision call and the last one sampled");
      assert.deepEqual((upstream[0]!.body as any).prompt, [...base[1]!.promptTokenIds!, ...sampled.slice(0, atToken)]);
      // The scripted model continues the turn it was cut in: the harness gets the backbone's answers again.
      assert.deepEqual(run.answers.map(seen), backbone.answers.map(seen));

      const calls = await rolloutCalls(url, branch.id);
      assert.equal(calls[0]!.replayOf?.seq, base[0]!.seq);
      assert.deepEqual(calls[1]!.promptTokenIds, [...base[1]!.promptTokenIds!, ...sampled.slice(0, atToken)]);
      assert.deepEqual(calls[1]!.choices[0]!.tokenIds, sampled.slice(atToken), "only the continuation is sampled here");
      // The next call's thread continues from the kept ids and the continuation: the backbone's prompt exactly.
      assert.deepEqual(calls[2]!.promptTokenIds, base[2]!.promptTokenIds);

      await finish(url, branch.id, 0);
      const [own] = await trajectories(url, branch.id);
      const [theirs] = await trajectories(url, backbone.id);
      assert.deepEqual(own!.token_ids, theirs!.token_ids, "the branch's path is the backbone's, token for token");
      const trained = own!.loss_mask.reduce((a, b) => a + b, 0);
      assert.equal(trained, sampled.length - atToken + base[2]!.choices[0]!.tokenIds.length);
      const start = base[1]!.promptTokenIds!.length;
      assert.ok(
        own!.loss_mask.slice(start, start + atToken).every((m) => m === 0),
        "the kept ids are context",
      );
    });
  }

  test("a token position past the call's answer is refused with the count", async () => {
    const id = backbones["false"]!.id;
    const r = await postJson(`${url}/api/rollouts`, { branch: { of: id, at_call: 0, at_token: 10_000 } });
    assert.equal(r.status, 400);
    assert.match(r.json.error.message, /at_token 10000 is past the \d+ token\(s\)/);
  });
});

describe("branches at a token position: the sim's own policy, seeded; messages mode refuses", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ sim: { seed: 3 }, gateway: { prompts: "tokens" } });
  });
  after(() => stack.close());

  test("every branch continues from the backbone's first ids, the rest sampled anew with the branch's seed", async () => {
    const url = stack.gateway.url;
    const backbone = await createRollout(url, {});
    assert.equal((await runAgent(backbone.base_urls.openai, stableTool)).answers.length, 2);
    await finish(url, backbone.id, 1);
    const base = await rolloutCalls(url, backbone.id);
    const sampled = base[1]!.choices[0]!.tokenIds;
    const atToken = 2;
    const endings = new Set<string>();
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const branch = await createRollout(url, { branch: { of: backbone.id, at_call: 1, at_token: atToken, seed } });
      const got = await runAgent(branch.base_urls.openai, stableTool);
      assert.equal(got.status, 200, got.error);
      const calls = await rolloutCalls(url, branch.id);
      assert.deepEqual(calls[1]!.promptTokenIds, [...base[1]!.promptTokenIds!, ...sampled.slice(0, atToken)]);
      assert.equal((calls[1]!.requestForwarded as any).seed, seed);
      endings.add(calls[1]!.choices[0]!.tokenIds.join(","));
    }
    assert.ok(endings.size > 1, "the branches sampled other continuations");
  });

  test("messages mode: a token position is refused in a sentence", async () => {
    const messages = await startStack({ sim: { seed: 3 } });
    try {
      const url = messages.gateway.url;
      const backbone = await createRollout(url, {});
      await runAgent(backbone.base_urls.openai, stableTool);
      await finish(url, backbone.id, 1);
      const r = await postJson(`${url}/api/rollouts`, { branch: { of: backbone.id, at_call: 0, at_token: 1 } });
      assert.equal(r.status, 400);
      assert.match(r.json.error.message, /at_token needs the gateway in --prompts tokens/);
    } finally {
      await messages.close();
    }
  });
});
