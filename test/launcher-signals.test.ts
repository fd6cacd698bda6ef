// `npx rlgate core` stopped with SIGTERM stops the core: npx runs the launcher (bin/rlgate.js) under `sh -c`, and the
// signal ends that shell without reaching the launcher, which then notices it was orphaned and stops the CLI. Checked
// by the port: it refuses connections once the core is gone.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { connect } from "node:net";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ROOT, tempDir } from "./helpers.ts";

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

test("SIGTERM to `npx rlgate core` stops the core and frees its port", { timeout: 120_000 }, async () => {
  const dir = tempDir("launcher");
  const npx = spawn("npx", ["rlgate", "core", "--port", "0", "--metrics-port", "0", "--data", join(dir, "core")], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    let out = "";
    const port = await new Promise<number>((resolve, reject) => {
      npx.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const m = /trainer service on grpc:\/\/127\.0\.0\.1:(\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      npx.once("exit", () => reject(new Error(`npx exited before the core listened:\n${out}`)));
    });
    assert.equal(await accepts(port), true);
    npx.kill("SIGTERM");
    // Until the core is gone (the test's timeout bounds the wait; no duration is asserted).
    while (await accepts(port)) await new Promise((r) => setTimeout(r, 200));
  } finally {
    npx.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
});
