import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { testCallRecord } from "../store/test-support.ts";
import { fromCallRecord } from "./call-tokens.ts";
import { reconstructRollout } from "./reconstruct.ts";
import { RolloutTree } from "./rollout-tree.ts";

describe("RolloutTree", () => {
  it("says where any prompt's deepest match is, for storing it as a reference plus new tokens", () => {
    const rt = new RolloutTree();
    const choice = (ids: number[]) => ({ index: 0, tokenIds: ids, logprobs: ids.map(() => -1), finishReason: "stop" });
    const base = { tokenSource: "upstream" as const, status: "ok" as const, startedAt: 0 };
    assert.deepEqual(rt.add({ ...base, callSeq: 1, promptIds: [1, 2, 3], choices: [choice([4, 5])] })?.ref, null);
    const attach = rt.add({ ...base, callSeq: 2, promptIds: [1, 2, 3, 4, 5, 6], choices: [choice([7])] });
    assert.deepEqual([attach?.kind, attach?.ref, attach?.matchedTokens], ["extend", { callSeq: 1, choiceIndex: 0 }, 5]);
    assert.equal(
      rt.add({ ...base, callSeq: 3, status: "timeout", promptIds: [1, 2, 3, 4, 5, 6, 7, 8], choices: [] }),
      null,
    );
    assert.deepEqual(rt.locate([1, 2, 3, 4, 5, 6, 7, 8]), { ref: { callSeq: 2, choiceIndex: 0 }, matchedTokens: 7 });
    assert.deepEqual(rt.locate([1, 2, 9]), { ref: { callSeq: 2, choiceIndex: 0 }, matchedTokens: 2 });
    assert.deepEqual(rt.locate([9]), { ref: null, matchedTokens: 0 });
    const rec = rt.build({ rolloutId: "r" });
    assert.deepEqual(rec.flags.failedCalls, [3]);
    assert.equal(rec.stats.uniqueTokens, 7);
  });
});

describe("RolloutTree.addLocated", () => {
  it("says where the prompt matched before the call was added, as locate did then, and adds what add adds", () => {
    // Three agents' growing histories, cut and edited, with failed and id-less calls between them.
    let s = 7;
    const rand = () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
    const ids = (n: number) => Array.from({ length: n }, () => Math.floor(rand() * 6));
    const located = new RolloutTree();
    const plain = new RolloutTree();
    const histories: number[][] = [[], [], []];
    for (let seq = 1; seq <= 300; seq++) {
      const agent = Math.floor(rand() * histories.length);
      let prompt = histories[agent]!;
      if (rand() < 0.2) prompt = prompt.slice(0, Math.floor(rand() * prompt.length));
      prompt = [...prompt, ...ids(1 + Math.floor(rand() * 4))];
      const sampled = ids(Math.floor(rand() * 4));
      const status = rand() < 0.1 ? ("upstream_error" as const) : ("ok" as const);
      const call = {
        callSeq: seq,
        tokenSource: rand() < 0.1 ? ("missing" as const) : ("upstream" as const),
        status,
        startedAt: seq,
        promptIds: rand() < 0.05 ? null : prompt,
        choices: [{ index: 0, tokenIds: sampled, logprobs: sampled.map(() => -1), finishReason: "stop" }],
      };
      const before = located.locate(prompt);
      const { attach, located: found } = located.addLocated(call);
      if (call.promptIds !== null) assert.deepEqual(found, before, `call ${seq}`);
      assert.deepEqual(attach, plain.add(call), `call ${seq}`);
      histories[agent] = [...prompt, ...sampled];
    }
    assert.deepEqual(located.build({ rolloutId: "r" }), plain.build({ rolloutId: "r" }));
  });
});

describe("fromCallRecord", () => {
  it("takes the prompt ids, every choice's ids and logprobs, status and source from a stored call", () => {
    const record = testCallRecord({
      seq: 42,
      rolloutId: "r",
      path: "/r/r/v1/chat/completions",
      stream: true,
      model: "qwen3",
      promptTokenIds: [1, 2, 3],
      choices: [
        { index: 1, tokenIds: [6], logprobs: [-0.5], finishReason: "stop" },
        { index: 0, tokenIds: [4, 5], logprobs: [-0.25, -0.125], finishReason: "stop" },
      ],
      timings: { start: 1000, upstreamStart: 1001, firstByte: 1002, firstToken: 1003, end: 1004, overheadMs: 0.1 },
    });
    const call = fromCallRecord(record);
    assert.deepEqual([call.callSeq, call.startedAt, call.status, call.tokenSource], [42, 1000, "ok", "upstream"]);
    const rec = reconstructRollout([call], { rolloutId: "r" });
    assert.deepEqual(
      rec.trajectories.map((t) => [t.trajectoryId, [...t.tokenIds], [...t.lossMask], [...t.logprobs]]),
      [
        ["r:42:0", [1, 2, 3, 4, 5], [0, 0, 0, 1, 1], [0, 0, 0, -0.25, -0.125]],
        ["r:42:1", [1, 2, 3, 6], [0, 0, 0, 1], [0, 0, 0, -0.5]],
      ],
    );
  });
});
