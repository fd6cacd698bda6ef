import assert from "node:assert/strict";
import { test } from "node:test";
import { SseParser } from "./sse-parser.ts";

test("events split across arbitrary chunk boundaries are reassembled with their raw bytes", () => {
  const stream = 'data: {"a":1}\n\n: keep-alive\n\ndata: {"b":\ndata: 2}\r\n\r\ndata: [DONE]\n\n';
  for (let size = 1; size <= stream.length; size++) {
    const parser = new SseParser();
    const events = [];
    for (let i = 0; i < stream.length; i += size) events.push(...parser.push(Buffer.from(stream.slice(i, i + size))));
    assert.deepEqual(
      events.map((e) => e.data),
      ['{"a":1}', null, '{"b":\n2}', "[DONE]"],
      `chunk size ${size}`,
    );
    assert.equal(Buffer.concat(events.map((e) => e.raw)).toString(), stream);
    assert.equal(parser.rest().length, 0);
  }
});

test("an unterminated event stays pending", () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push(Buffer.from('data: {"x"')), []);
  assert.equal(parser.rest().toString(), 'data: {"x"');
});

test("multi-byte UTF-8 split between chunks survives", () => {
  const text = 'data: {"t":"héllo → 世界"}\n\n';
  const bytes = Buffer.from(text);
  const parser = new SseParser();
  const events = [...parser.push(bytes.subarray(0, 12)), ...parser.push(bytes.subarray(12))];
  assert.equal(events[0]!.data, '{"t":"héllo → 世界"}');
});
