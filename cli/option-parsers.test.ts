// One syntax for every duration and size flag: what each accepts, and the message a bad value gets.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { bytes, duration, integer } from "./option-parsers.ts";

describe("option parsers", () => {
  test("durations: ms, s, m, h, d, fractions; a plain number is milliseconds", () => {
    assert.deepEqual(["500ms", "5s", "1.5s", "10m", "1h", "7d", "250", " 2s "].map(duration), [
      500,
      5000,
      1500,
      600_000,
      3_600_000,
      7 * 86_400_000,
      250,
      2000,
    ]);
  });

  test("a bad duration or size is refused with an example of a good one", () => {
    for (const bad of ["5 minutes", "-1s", "s", "1w", ""])
      assert.throws(() => duration(bad), /expected a duration such as 500ms, 30s, 2m, 1h or 7d/, bad);
    assert.throws(() => bytes("ten"), /expected a size such as 100mb/);
    assert.throws(() => integer("1.5"), /non-negative integer/);
    assert.deepEqual(["100mb", "512kb", "1024"].map(bytes), [100 * 1024 ** 2, 512 * 1024, 1024]);
  });

  test("every duration flag of every command takes the one syntax (serve --member-timeout 5x is refused by the CLI)", () => {
    const run = spawnSync(process.execPath, ["--import", "tsx", "cli/index.ts", "serve", "--member-timeout", "5x"], {
      encoding: "utf8",
      cwd: new URL("..", import.meta.url).pathname,
    });
    assert.equal(run.status, 1);
    assert.match(
      run.stderr,
      /option '--member-timeout <duration>' argument '5x' is invalid\. expected a duration such as 500ms/,
    );
  });
});
