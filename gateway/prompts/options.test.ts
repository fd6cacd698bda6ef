import { test } from "node:test";
import assert from "node:assert/strict";
import { fallbackReason } from "./options.ts";

const messages = [{ role: "user", content: "hi" }];

test("reasoning_effort (pi sends it on every call) keeps a call in tokens mode: no built-in template reads it", () => {
  assert.equal(fallbackReason({ model: "m", messages, reasoning_effort: "medium" }), null);
});

test("an option only the server's chat layer can honour still falls back, named", () => {
  assert.equal(
    fallbackReason({ model: "m", messages, response_format: { type: "json_object" } }),
    "unsupported_option:response_format",
  );
  assert.equal(
    fallbackReason({ model: "m", messages, chat_template_kwargs: { reasoning_effort: "high" } }),
    "unsupported_option:chat_template_kwargs.reasoning_effort",
  );
});
