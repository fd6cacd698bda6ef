import assert from "node:assert/strict";
import { test } from "node:test";
import { authCredentials, bearerMatches, sameSecret } from "./secrets.ts";

test("authorization schemes are matched in any case, credentials trimmed", () => {
  assert.equal(authCredentials("Bearer abc"), "abc");
  assert.equal(authCredentials("bearer abc"), "abc");
  assert.equal(authCredentials("BEARER   abc "), "abc");
  assert.equal(authCredentials("Basic abc"), null);
  assert.equal(authCredentials("Bearer"), null);
  assert.equal(authCredentials("Bearer "), null);
  assert.equal(authCredentials(undefined), null);
  assert.equal(authCredentials(["Bearer abc"]), null);
});

test("secrets compare equal only when equal, whatever their lengths", () => {
  assert.equal(sameSecret("s3cret", "s3cret"), true);
  assert.equal(sameSecret("s3cre", "s3cret"), false);
  assert.equal(sameSecret("s3cret-longer", "s3cret"), false);
  assert.equal(sameSecret(null, "s3cret"), false);
  assert.equal(bearerMatches("bearer s3cret", "s3cret"), true);
  assert.equal(bearerMatches("Bearer s3cretx", "s3cret"), false);
});
