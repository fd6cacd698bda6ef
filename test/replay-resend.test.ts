// `rlgate replay resend` against the sim: the same server answers every recorded call the same; a server whose chat
// template changed renders a different prompt, and the first differing prompt token is shown in its context.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { resendCalls, type ResendOptions } from "../replay/resend.ts";
import { ReplayUpstream } from "../replay/upstream.ts";
import { startSim, type SimServer } from "../sim/index.ts";
import { qwen3Tokenizer } from "../tokenizer/qwen3.ts";
import type { CallRecord } from "../store/records.ts";
import { AGENT_SCRIPT, createRollout, playAgent, rolloutCalls, runCli, startStack, type Stack } from "./helpers.ts";

const tokenizer = qwen3Tokenizer();

const cli = (args: string[]) => runCli(args);

// A template change of the kind that happens between model releases: no newline after <tool_response>.
const CHANGED_TEMPLATE = tokenizer.chatTemplate.replace("'\\n<tool_response>\\n'", "'\\n<tool_response>'");

describe("replay resend", () => {
  let stack: Stack;
  let changed: SimServer;
  let rolloutId: string;
  let calls: CallRecord[];

  before(async () => {
    assert.notEqual(CHANGED_TEMPLATE, tokenizer.chatTemplate, "the template change applies");
    stack = await startStack({ sim: { script: AGENT_SCRIPT } });
    changed = await startSim({ port: 0, script: AGENT_SCRIPT, chatTemplate: CHANGED_TEMPLATE });
    const rollout = await createRollout(stack.gateway.url, { harness: "scripted" });
    rolloutId = rollout.id;
    // The sim samples deterministically, so the sampled ids come back the same too (resend expects that only of
    // greedy or seeded calls, and reports it for the others).
    await playAgent(rollout.base_urls.openai, AGENT_SCRIPT.length, true);
    calls = await rolloutCalls(stack.gateway.url, rollout.id);
  });
  after(async () => {
    await changed?.close();
    await stack?.close();
  });

  const options = (url: string): ResendOptions => ({
    upstream: new ReplayUpstream({ url }),
    decode: (ids) => tokenizer.decode(ids),
    concurrency: 2,
  });

  test("the same server: prompt ids, sampled ids and answers are the same for every call", async () => {
    const report = await resendCalls(rolloutId, calls, options(stack.sim.url));
    assert.equal(report.calls.length, 3);
    for (const c of report.calls) {
      assert.equal(c.error, null);
      assert.ok(c.promptSame, JSON.stringify(c.promptDifference));
      assert.deepEqual(
        c.choices.map((ch) => [ch.sampledSame, ch.answerSame]),
        [[true, true]],
      );
    }
  });

  test("a changed chat template: the first call (no tool result yet) is the same, later ones differ at the tool response", async () => {
    const report = await resendCalls(rolloutId, calls, options(changed.url));
    const [first, second, third] = report.calls;
    assert.ok(first!.promptSame);
    for (const c of [second!, third!]) {
      assert.equal(c.promptSame, false);
      assert.equal(c.same, false);
      const d = c.promptDifference!;
      // The recorded prompt had "<tool_response>\n" where the new one has "<tool_response>" and the result.
      const recorded = calls.find((r) => r.seq === c.callSeq)!.promptTokenIds!;
      assert.equal(tokenizer.decode(recorded.slice(0, d.position)).endsWith("<tool_response>"), true);
      assert.match(d.recorded!.before, /<tool_response>$/, JSON.stringify(d));
      assert.equal(d.recorded!.token.startsWith("\n"), true, JSON.stringify(d.recorded));
      assert.equal(d.now!.before, d.recorded!.before);
      assert.notEqual(d.now!.tokenId, d.recorded!.tokenId);
    }
  });

  test("CLI: text report, exit 0 when the same and 3 when a prompt differs; --call picks calls; --json", async () => {
    const same = await cli([
      "replay",
      "resend",
      rolloutId,
      "--gateway",
      stack.gateway.url,
      "--upstream",
      stack.sim.url,
    ]);
    assert.equal(same.code, 0, same.stderr + same.stdout);
    assert.match(same.stdout, /3 of 3 calls the same/);

    const differs = await cli([
      "replay",
      "resend",
      rolloutId,
      "--data",
      stack.dataDir,
      "--upstream",
      changed.url,
      "--call",
      "2",
    ]);
    assert.equal(differs.code, 3, differs.stderr + differs.stdout);
    assert.match(differs.stdout, /call #2 .*DIFFERENT/);
    assert.match(differs.stdout, /prompt ids: differ at position \d+/);
    assert.match(differs.stdout, /recorded: …[^\n]*<tool_response>⟦⏎/);
    assert.match(differs.stdout, /0 of 1 calls the same/);

    const json = await cli([
      "replay",
      "resend",
      rolloutId,
      "--gateway",
      stack.gateway.url,
      "--upstream",
      changed.url,
      "--call",
      "1",
      "--json",
    ]);
    assert.equal(json.code, 0, json.stderr);
    assert.equal(JSON.parse(json.stdout).calls[0].promptSame, true);
  });

  test("CLI failures: a call the rollout does not have, a server that is down", async () => {
    const nocall = await cli([
      "replay",
      "resend",
      rolloutId,
      "--gateway",
      stack.gateway.url,
      "--upstream",
      stack.sim.url,
      "--call",
      "9",
    ]);
    assert.equal(nocall.code, 1);
    assert.match(nocall.stderr, /has no call 9 \(it has 3\)/);
    const down = await cli([
      "replay",
      "resend",
      rolloutId,
      "--gateway",
      stack.gateway.url,
      "--upstream",
      "http://127.0.0.1:9",
      "--call",
      "1",
    ]);
    assert.equal(down.code, 1);
    assert.match(down.stdout, /error: cannot reach the upstream at http:\/\/127\.0\.0\.1:9/);
  });
});
