import assert from "node:assert/strict";
import { test } from "node:test";
import { nullValues } from "./json-splice.ts";

const EDITS = [
  { key: "token_ids", count: 1 },
  { key: "logprobs", count: 1 },
];

test("the listed keys' values become null and every other byte stays as the upstream wrote it", () => {
  const text =
    '{"id":"c1","choices":[{"index":0,"delta":{"content":"a \\"b\\" ]} {["},"logprobs":{"content":[{"token":"]}\\\\","logprob":-1e-05,"bytes":[93,125],"top_logprobs":[]}]},"finish_reason":null,"token_ids":[42]}]}';
  assert.equal(
    nullValues(text, EDITS),
    '{"id":"c1","choices":[{"index":0,"delta":{"content":"a \\"b\\" ]} {["},"logprobs":null,"finish_reason":null,"token_ids":null}]}',
  );
});

test("whitespace around keys and values is kept; scalar and null values are replaced", () => {
  const text = '{ "token_ids" : 7 , "logprobs" :null }';
  assert.equal(nullValues(text, EDITS), '{ "token_ids" : null , "logprobs" :null }');
});

test("a key's name as a value, or inside a string, is not a key", () => {
  const text = '{"content":"token_ids","note":"\\"logprobs\\":[1]","token_ids":[1],"logprobs":null}';
  assert.equal(
    nullValues(text, EDITS),
    '{"content":"token_ids","note":"\\"logprobs\\":[1]","token_ids":null,"logprobs":null}',
  );
});

test("a text that does not hold exactly the expected keys is refused, never guessed at", () => {
  // duplicate key (JSON.parse keeps the last one; the parsed count says one)
  assert.equal(nullValues('{"token_ids":[1],"token_ids":[2],"logprobs":null}', EDITS), null);
  // the key elsewhere in the object than where the caller counted it
  assert.equal(nullValues('{"token_ids":[1],"x":{"logprobs":1},"logprobs":null}', EDITS), null);
  // a key the caller expected is missing
  assert.equal(nullValues('{"token_ids":[1]}', EDITS), null);
  // a payload of several lines (an SSE event with more than one data: line)
  assert.equal(nullValues('{"token_ids":[1],\n"logprobs":null}', EDITS), null);
  // not well formed: an unterminated string or value
  assert.equal(nullValues('{"token_ids":[1,"logprobs":{"a":"b}', EDITS), null);
  assert.equal(nullValues('{"token_ids":[1],"logprobs":{"a":[1]', EDITS), null);
});

test("no edits, or keys the text does not hold and was not expected to, leave the text as it is", () => {
  const text = '{"choices":[],"usage":{"prompt_tokens":3}}';
  assert.equal(nullValues(text, []), text);
  assert.equal(
    nullValues(text, [
      { key: "token_ids", count: 0 },
      { key: "logprobs", count: 0 },
    ]),
    text,
  );
});

test("a key whose value the text ends before is refused", () => {
  assert.equal(nullValues('{"logprobs":null,"token_ids":', EDITS), null);
  assert.equal(nullValues('{"logprobs":null,"token_ids":12', EDITS), null);
});
