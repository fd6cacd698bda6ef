import assert from "node:assert/strict";
import { test } from "node:test";
import { parseRequestTarget, RequestTargetError } from "./request-target.ts";

test("ordinary targets are read as sent", () => {
  const read = (target: string | undefined) => {
    const { pathname, search, url } = parseRequestTarget(target);
    assert.equal(url.pathname, pathname, "the URL routers read has the path as sent");
    return { pathname, search };
  };
  assert.deepEqual(read("/r/r_1/v1/chat/completions"), { pathname: "/r/r_1/v1/chat/completions", search: "" });
  assert.deepEqual(read("/v1/models/Qwen/Qwen3-8B?x=1&y=%2e%2e"), {
    pathname: "/v1/models/Qwen/Qwen3-8B",
    search: "?x=1&y=%2e%2e",
  });
  assert.deepEqual(read(undefined), { pathname: "/", search: "" });
  assert.equal(parseRequestTarget("/a/.hidden/b..c/...").pathname, "/a/.hidden/b..c/...");
  assert.equal(parseRequestTarget("/v1/models/a%20b").pathname, "/v1/models/a%20b");
});

test("every spelling of a dot segment, an encoded separator or a rewritten path is refused", () => {
  const refused = [
    "/r/id/../../api/rollouts/id/finish",
    "/r/id/./../api",
    "/r/id/..",
    "/r/id/%2e%2e/%2e%2e/api/rollouts",
    "/r/id/%2E%2e/%2E%2E/api",
    "/r/id/.%2e/.%2E/api",
    "/r/id/%2e./api",
    "/r/id/%2e/api",
    "/r/id/..%2f..%2fapi",
    "/r/id/..%2F..%2Fapi",
    "/r/id/..%5c..%5capi",
    "/r/id/..\\..\\api",
    "/r/id\\..\\..\\api",
    "/r/id/%252e%252e/api",
    "/r/id/%00/x",
    "/r/id/%zz",
    "/r/id/%2",
    "//r/id/v1/models",
    "//evil/api/rollouts",
    "http://rlgate.local/api/rollouts",
    "*",
    "api/rollouts",
    "",
    "/r/id/v1 /x",
    "/r/id/\t../api",
    "/r/id/v1/#/../../api",
    "/r/id/é",
  ];
  for (const target of refused)
    assert.throws(() => parseRequestTarget(target), RequestTargetError, `${JSON.stringify(target)} was accepted`);
});
