import assert from "node:assert/strict";
import { test } from "node:test";
import { CommanderError } from "commander";
import { coreCommand } from "./core-command.ts";

test("--stale without --max-staleness is refused before the core starts (it would judge nothing)", async () => {
  const command = coreCommand()
    .exitOverride()
    .configureOutput({ writeErr: () => {} });
  await assert.rejects(
    command.parseAsync(["--stale", "drop"], { from: "user" }),
    (error: unknown) =>
      error instanceof CommanderError && /--stale drop judges nothing without --max-staleness/.test(error.message),
  );
});
