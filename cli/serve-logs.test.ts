// `rlgate serve` with its stderr going to a pipe (a log collector, a container) writes its log as JSON lines.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, test } from "node:test";
import { createRollout, spawnCli, tempDir, until, type CliProcess } from "../test/helpers.ts";

const dir = tempDir("serve-logs");
let proc: CliProcess | null = null;
after(async () => {
  await proc?.kill();
  rmSync(dir, { recursive: true, force: true });
});

test(
  "a call the upstream breaks mid-stream is logged as one JSON line with its call number and status",
  { timeout: 120_000 },
  async () => {
    proc = spawnCli(["serve", "--port", "0", "--upstream", "sim", "--data", dir], { RLGATE_LOG_FORMAT: "" });
    const [, url] = (await proc.waitFor(/listening on (http:\/\/\S+)/, 90_000)) as RegExpMatchArray;
    const rollout = await createRollout(url!, { group: "logs" });
    const res = await fetch(`${rollout.base_urls.openai}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-sim-fault": "reset" },
      body: JSON.stringify({ model: "Qwen/Qwen3-8B", messages: [{ role: "user", content: "hi" }], stream: true }),
    });
    await res.text().catch(() => "broken, as the upstream's was");
    const line = await until(
      () =>
        proc!
          .output()
          .split("\n")
          .find((l) => l.startsWith("{") && l.includes('"status":"upstream_error"')),
      30_000,
      "the JSON log line",
    );
    const record = JSON.parse(line) as Record<string, unknown>;
    assert.equal(record.level, 40);
    assert.equal(record.component, "gateway");
    assert.equal(typeof record.call, "number");
    assert.equal(typeof record.msg, "string");
  },
);
