// The Python client as a package: installed into a fresh virtual environment (Debian's grpcio, grpc-tools and numpy
// through --system-site-packages; no Python registry is reachable), it runs the example trainer from outside the
// checkout against a core, with the gRPC modules built at install time (nothing generated at first use).
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { checkPython } from "../../cli/doctor-command.ts";
import { startCore, type Core } from "../../rl-core/core/index.ts";
import { AGENT_SCRIPT, createRollout, playAgent, postJson, ROOT, startStack, tempDir, type Stack } from "../helpers.ts";

const execFileAsync = promisify(execFile);
const SYSTEM_PYTHON = process.env.RLGATE_PYTHON ?? "/usr/bin/python3";
const probe = spawnSync(SYSTEM_PYTHON, ["-c", "import grpc, grpc_tools, numpy, setuptools, venv, ensurepip"], {
  encoding: "utf8",
});
const skip =
  probe.status === 0
    ? false
    : `${SYSTEM_PYTHON} lacks grpcio, grpc-tools, numpy, setuptools or venv (Debian: python3-grpcio python3-grpc-tools python3-numpy python3-venv)`;
if (skip && process.env.CI) throw new Error(`${skip}: CI must install them`);

let stack: Stack;
let core: Core;
const coreDir = tempDir("pkg-core");
const venv = tempDir("pkg-venv");
const outside = tempDir("pkg-cwd");

before(async () => {
  if (skip) return;
  stack = await startStack({ sim: { script: AGENT_SCRIPT }, gateway: { grpcPort: 0 } });
  core = await startCore({
    gateways: [stack.gateway.grpc!.address],
    port: 0,
    dataDir: coreDir,
    tokenBudget: 1_000_000,
    batchTimeoutMs: 200,
  });
});
after(async () => {
  await core?.close();
  await stack?.close();
  for (const dir of [coreDir, venv, outside]) rmSync(dir, { recursive: true, force: true });
});

test(
  "pip install ./clients/python into a fresh venv; the example trainer runs from outside the checkout",
  { skip, timeout: 300_000 },
  async () => {
    await execFileAsync(SYSTEM_PYTHON, ["-m", "venv", "--system-site-packages", venv], { timeout: 120_000 });
    const pip = await execFileAsync(
      join(venv, "bin/pip"),
      ["install", "--no-build-isolation", "--no-index", join(ROOT, "clients/python")],
      { cwd: outside, timeout: 240_000 },
    );
    assert.match(pip.stdout, /Successfully installed rlgate-client-0\.1\.0/);
    const site = join(venv, "lib", readdirSync(join(venv, "lib"))[0]!, "site-packages");
    for (const m of ["trainer_pb2.py", "trainer_pb2_grpc.py", "trajectories_pb2.py", "trajectories_pb2_grpc.py"]) {
      assert.ok(existsSync(join(site, "rlgate/v1", m)), `${m} built into the package`);
    }
    const python = join(venv, "bin/python");
    assert.equal(checkPython(python).level, "ok", "rlgate doctor --python finds it");

    const gw = stack.gateway.url;
    const rewards = [1, 0];
    for (const reward of rewards) {
      const r = await createRollout(gw, {
        group: "pkg-task",
        harness: "scripted",
        metadata: { group_size: rewards.length },
      });
      await playAgent(r.base_urls.openai, 2, true);
      assert.equal((await postJson(`${gw}/api/rollouts/${r.id}/finish`, { reward })).status, 200);
    }
    // From a folder with no checkout in it, and no proto/ to fall back on: only the installed modules can serve.
    const { stdout } = await execFileAsync(
      join(venv, "bin/rlgate-example-trainer"),
      ["--core", core.address, "--max-batches", "1", "--json"],
      {
        cwd: outside,
        env: { ...process.env, RLGATE_PROTO_DIR: join(outside, "no-proto-here"), PYTHONPATH: "" },
        timeout: 120_000,
      },
    );
    const batch = JSON.parse(stdout.trim().split("\n")[0]!) as {
      groups: number;
      acked: boolean;
      row_details: Array<{ reward: number }>;
    };
    assert.equal(batch.groups, 1);
    assert.equal(batch.acked, true);
    assert.deepEqual([...new Set(batch.row_details.map((r) => r.reward))].sort(), [0, 1]);

    const where = await execFileAsync(
      python,
      ["-c", "import rlgate_client, rlgate.v1.trainer_pb2 as m; print(rlgate_client.__file__); print(m.__file__)"],
      { cwd: outside },
    );
    for (const line of where.stdout.trim().split("\n"))
      assert.ok(line.startsWith(site), `${line} is the installed copy`);
  },
);
