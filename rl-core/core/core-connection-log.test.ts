// A gateway that goes away (as `rlgate replay deliver` does when it exits) is logged once, not at every reconnect the
// core keeps trying: here a port that accepts and drops each connection, so the core fails again and again.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import { test } from "node:test";
import { tempDir } from "../../test/helpers.ts";
import { startCore } from "./core.ts";

test("a gateway that stays away: one 'disconnected' line however many reconnects fail", async () => {
  let attempts = 0;
  let more: () => void = () => {};
  const dropper = createServer((socket: Socket) => {
    attempts++;
    socket.destroy();
    more();
  });
  await new Promise<void>((resolve) => dropper.listen(0, "127.0.0.1", resolve));
  const { port } = dropper.address() as { port: number };
  const dir = tempDir("core-conn-log");
  const lines: string[] = [];
  const core = await startCore({
    gateways: [`127.0.0.1:${port}`],
    port: 0,
    dataDir: dir,
    log: (line) => lines.push(line),
  });
  try {
    // Until the core has tried five times (events, not a clock: the test's timeout bounds it).
    while (attempts < 5) await new Promise<void>((resolve) => (more = resolve));
    const about = lines.filter((l) => l.includes(`gateway 127.0.0.1:${port}`));
    assert.equal(about.length, 1, about.join("\n"));
    assert.match(about[0]!, /disconnected \(.*\); reconnecting with backoff, logged when it is back$/);
  } finally {
    await core.close();
    dropper.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
