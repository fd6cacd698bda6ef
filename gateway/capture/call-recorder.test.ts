import assert from "node:assert/strict";
import { test } from "node:test";
import { judgeTokens } from "./call-recorder.ts";

const tokenSourceOf = (outcome: Parameters<typeof judgeTokens>[0]) => judgeTokens(outcome).source;

test("token source: upstream only when the prompt and every finished choice carry ids", () => {
  const choice = (ids: number[], finish: string | null = "stop") => ({
    index: 0,
    tokenIds: ids,
    logprobs: null,
    finishReason: finish,
  });
  assert.equal(tokenSourceOf({ status: "ok", promptTokenIds: [1], choices: [choice([2])] }), "upstream");
  assert.equal(tokenSourceOf({ status: "ok", promptTokenIds: null, choices: [choice([2])] }), "missing");
  assert.equal(tokenSourceOf({ status: "ok", promptTokenIds: [], choices: [choice([2])] }), "missing");
  assert.equal(tokenSourceOf({ status: "ok", promptTokenIds: [1], choices: [choice([])] }), "missing");
  assert.equal(tokenSourceOf({ status: "ok", promptTokenIds: [1], choices: [] }), "missing");
  // An aborted stream may end before any token: what it has is still upstream-reported.
  assert.equal(
    tokenSourceOf({ status: "client_aborted", promptTokenIds: [1], choices: [choice([], null)] }),
    "upstream",
  );
});

test("ids that disagree with the upstream's usage or logprob counts are flagged with the reason", () => {
  const choice = { index: 0, tokenIds: [5, 6], logprobs: [-1, -2], finishReason: "stop" };
  assert.deepEqual(
    judgeTokens({
      status: "ok",
      promptTokenIds: [1, 2],
      choices: [choice],
      usage: { prompt_tokens: 2, completion_tokens: 2 },
    }),
    {
      source: "upstream",
      issue: null,
    },
  );
  const short = judgeTokens({
    status: "ok",
    promptTokenIds: [1, 2],
    choices: [choice],
    usage: { prompt_tokens: 2, completion_tokens: 4 },
  });
  assert.equal(short.source, "missing");
  assert.match(short.issue!, /2 sampled token ids but usage.completion_tokens is 4/);
  const lp = judgeTokens({ status: "ok", promptTokenIds: [1], choices: [{ ...choice, logprobs: [-1] }] });
  assert.match(lp.issue!, /2 token ids but 1 logprobs/);
});
