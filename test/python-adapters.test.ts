// The trainer adapters of the Python client (clients/python/rlgate_client/adapters: verl, OpenRLHF, TRL) under
// their unittest suite (clients/python/tests/test_adapters.py): random batches with multi-row rollouts, context
// inside responses and mixed lengths, checked against each framework's definitions read at its source. Needs
// Debian's python3-numpy and python3-grpcio (the client); python3-torch for the tensor tests, which CI installs.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { trainerPython } from "./grpc-helpers.ts";
import { ROOT } from "./helpers.ts";

const python = trainerPython();
const skip = python ? false : "Debian's python3-grpcio, python3-grpc-tools and python3-numpy are not installed";
if (!python && process.env.CI) throw new Error(`${skip}: CI must install them`);
const torch = python ? spawnSync(python, ["-c", "import torch"]).status === 0 : false;
if (python && !torch && process.env.CI) throw new Error("python3-torch is not installed: CI must install it");

test("the verl, OpenRLHF and TRL adapters pass their Python tests", { skip, timeout: 120_000 }, () => {
  const run = spawnSync(python!, ["-m", "unittest", "discover", "-v", "-s", "tests", "-p", "test_adapters.py"], {
    cwd: join(ROOT, "clients", "python"),
    encoding: "utf8",
  });
  const out = `${run.stdout}\n${run.stderr}`;
  assert.equal(run.status, 0, out);
  const ran = /Ran (\d+) tests?/.exec(out);
  assert.ok(ran && Number(ran[1]) >= 20, out);
  const skipped = [...out.matchAll(/skipped '([^']*)'/g)].map((m) => m[1]);
  // Without torch only the tensor tests skip, each saying why; with it none does.
  if (torch) assert.deepEqual(skipped, [], out);
  else assert.ok(skipped.length > 0 && skipped.every((s) => /python3-torch/.test(s!)), out);
});
