import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseSince } from "./source.ts";

describe("--since", () => {
  const now = Date.parse("2026-12-01T15:00:00Z");
  test("a duration ago, a date, epoch ms", () => {
    assert.equal(parseSince("30m", now), now - 30 * 60_000);
    assert.equal(parseSince("2h", now), now - 2 * 3_600_000);
    assert.equal(parseSince("1.5d", now), now - 1.5 * 86_400_000);
    assert.equal(parseSince("90s", now), now - 90_000);
    assert.equal(parseSince("2026-12-01T14:00Z", now), Date.parse("2026-12-01T14:00Z"));
    assert.equal(parseSince("1796136073308", now), 1796136073308);
  });
  test("anything else is refused with the forms it takes", () => {
    assert.throws(
      () => parseSince("yesterday", now),
      /--since takes a date .*epoch ms, or a duration ago \(30m, 2h\); got 'yesterday'/,
    );
    assert.throws(() => parseSince("5w", now), /got '5w'/);
  });
});
