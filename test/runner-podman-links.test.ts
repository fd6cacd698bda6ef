// The runner reads a task image's folders from the host (its root is mounted there): a link in the image resolves
// against the host's root, not the container's. An image whose /var/tmp is a link to a folder of the host's must leave
// that folder as it is (the runner makes its in-memory folders world-writable only where they are real folders).
import assert from "node:assert/strict";
import { chmodSync, cpSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { resolveHarness } from "../runner/harnesses.ts";
import { ensureHostImage } from "../runner/podman-host-image.ts";
import { runTasks } from "../runner/run.ts";
import { DEFAULT_LIMITS } from "../runner/sandbox.ts";
import { loadTask, type Task } from "../runner/task.ts";
import { ROOT, startStack, tempDir, type Stack } from "./helpers.ts";
import { podmanForTests } from "./require-in-ci.ts";

const unavailable = podmanForTests();

describe("podman: links in a task image", { skip: unavailable ? `podman: ${unavailable}` : false }, () => {
  let stack: Stack;
  let task: Task;
  const work = tempDir("podman-links");
  const hostFolder = join(work, "host-folder");

  before(async () => {
    stack = await startStack();
    mkdirSync(hostFolder);
    chmodSync(hostFolder, 0o700);
    const dir = join(work, "task");
    cpSync(join(ROOT, "examples", "tasks", "fix-add"), dir, { recursive: true });
    writeFileSync(
      join(dir, "task.json"),
      JSON.stringify({
        setup: `rm -rf /var/tmp && ln -s ${hostFolder} /var/tmp`,
        verifier: "python3 tests/test_add.py",
      }),
    );
    task = { ...loadTask(dir), image: await ensureHostImage() };
  });
  after(async () => {
    await stack.close();
    rmSync(work, { recursive: true, force: true });
  });

  test("/var/tmp a link to a host folder: the host folder keeps its mode, the rollout runs", async () => {
    const [r] = await runTasks({
      tasks: [task],
      harness: resolveHarness("sed -i 's/a - b/a + b/' calc.py"),
      n: 1,
      concurrency: 1,
      timeoutSec: 60,
      gatewayUrl: stack.gateway.url,
      limits: DEFAULT_LIMITS,
      workDir: work,
      sandbox: "podman",
    });
    assert.equal(statSync(hostFolder).mode & 0o7777, 0o700, "the host's folder was not made world-writable");
    assert.equal(r!.status, "ok", r!.error ?? "");
    assert.equal(r!.reward, 1);
  });
});
