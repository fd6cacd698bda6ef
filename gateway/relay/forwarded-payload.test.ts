import assert from "node:assert/strict";
import { test } from "node:test";
import { RawJson, SplicedJson } from "../../store/records.ts";
import { prepareChatRequest } from "../upstream/vllm.ts";
import { forwardedPayload } from "./forwarded-payload.ts";

function payloadFor(rawText: string, edit: (body: Record<string, unknown>) => Record<string, unknown>) {
  const raw = new RawJson(rawText);
  const body = JSON.parse(rawText) as Record<string, unknown>;
  const forwarded = edit(body);
  const { bytes: payload, record } = forwardedPayload(forwarded, body, raw);
  const text = typeof payload === "string" ? payload : Buffer.from(payload).toString();
  // What is recorded is exactly what was sent.
  assert.equal(Buffer.from(record.bytes).toString(), text);
  return { raw, forwarded, payload, record, text };
}

test("added fields are spliced into the harness's own bytes, which otherwise travel unchanged", () => {
  const rawText = ' \n{"model":"m", "messages":[{"role":"user","content":"h\\u00e9 \\"x\\" 𝄞"}],"temperature":0.70}';
  const { forwarded, text, record } = payloadFor(rawText, (body) => prepareChatRequest(body, false).forwarded);
  assert.ok(record instanceof SplicedJson, "recorded as the received body plus the splice");
  assert.deepEqual(JSON.parse(text), forwarded);
  assert.equal(
    text,
    ' \n{"return_token_ids":true,"logprobs":true,"model":"m", "messages":[{"role":"user","content":"h\\u00e9 \\"x\\" 𝄞"}],"temperature":0.70}',
  );
});

test("an empty object gets the fields without a dangling comma; an unchanged body is sent as received", () => {
  const empty = payloadFor("{ }", (body) => ({ ...body, return_token_ids: true }));
  assert.equal(empty.text, '{"return_token_ids":true }');
  const same = payloadFor('{"a":1}', (body) => ({ ...body }));
  assert.equal(same.record, same.raw);
});

test("any other change is serialized whole: a changed or removed key, a replaced nested object, an undefined field", () => {
  const cases: Array<(body: Record<string, unknown>) => Record<string, unknown>> = [
    (body) => ({ ...body, model: "served" }),
    (body) => {
      const { stream_options: _dropped, ...rest } = body;
      return { ...rest, return_token_ids: true };
    },
    (body) => ({ ...body, messages: [...(body["messages"] as unknown[])] }),
    (body) => ({ ...body, extra: undefined, return_token_ids: true }),
  ];
  for (const edit of cases) {
    const { forwarded, payload, record } = payloadFor(
      '{"model":"m","messages":[],"stream_options":{"include_usage":true}}',
      edit,
    );
    assert.equal(typeof payload, "string");
    assert.equal(payload, JSON.stringify(forwarded));
    assert.ok(!(record instanceof SplicedJson));
  }
});
