// A runner in a process of its own, for tests that kill it: one podman rollout of the example task whose harness
// sleeps, against the gateway at argv[2], with the harness's time limit argv[3] seconds. Prints "agent" when the
// rollout's agent stage starts.
import { join } from "node:path";
import { resolveHarness } from "../runner/harnesses.ts";
import { ensureHostImage } from "../runner/podman-host-image.ts";
import { runTasks } from "../runner/run.ts";
import { DEFAULT_LIMITS } from "../runner/sandbox.ts";
import { loadTask } from "../runner/task.ts";
import { ROOT } from "./helpers.ts";

const [gatewayUrl, timeoutSec, workDir] = process.argv.slice(2);
const image = await ensureHostImage();
await runTasks({
  tasks: [{ ...loadTask(join(ROOT, "examples", "tasks", "fix-add")), image }],
  harness: resolveHarness("sleep 600"),
  n: 1,
  concurrency: 1,
  timeoutSec: Number(timeoutSec),
  gatewayUrl: gatewayUrl!,
  limits: DEFAULT_LIMITS,
  workDir,
  sandbox: "podman",
  events: { stage: (_key, stage) => stage === "agent" && console.log("agent") },
});
