// The control API's naming view: our keys to snake_case and back; someone else's JSON untouched.
import assert from "node:assert/strict";
import { test } from "node:test";
import { RawJson } from "../store/records.ts";
import { fromSnakeCase, toSnakeCase } from "./json-case.ts";

test("our keys become snake_case at any depth; metadata and bodies are kept; the inverse gives the record back", () => {
  const record = {
    rolloutId: "r1",
    httpStatus: 200,
    requestReceived: new RawJson('{"messages":[{"role":"user","content":"hi"}],"someCamel":1}'),
    metadata: { camelKey: { innerKey: 1 } },
    choices: [{ tokenIds: [1, 2, 3], finishReason: "stop", logprobs: null }],
    timings: { overheadMs: 0.2, firstToken: null },
    base_urls: { openai: "x" },
  };
  const view = toSnakeCase(record) as Record<string, unknown>;
  assert.deepEqual(JSON.parse(JSON.stringify(view)), {
    rollout_id: "r1",
    http_status: 200,
    request_received: { messages: [{ role: "user", content: "hi" }], someCamel: 1 },
    metadata: { camelKey: { innerKey: 1 } },
    choices: [{ token_ids: [1, 2, 3], finish_reason: "stop", logprobs: null }],
    timings: { overhead_ms: 0.2, first_token: null },
    base_urls: { openai: "x" },
  });
  const back = fromSnakeCase<Record<string, unknown>>(JSON.parse(JSON.stringify(view)));
  assert.deepEqual(back.choices, record.choices);
  assert.deepEqual(back.requestReceived, { messages: [{ role: "user", content: "hi" }], someCamel: 1 });
  assert.deepEqual(back.metadata, record.metadata);
  assert.deepEqual(back.timings, record.timings);
});

test("kinds used as map keys (break counts by kind) read back as they were", () => {
  const stats = {
    breakCounts: { sub_agent: 1, reserialization: 2 },
    statusCounts: { upstream_error: 1, client_aborted: 2 },
  };
  assert.deepEqual(fromSnakeCase(JSON.parse(JSON.stringify(toSnakeCase(stats)))), stats);
});
