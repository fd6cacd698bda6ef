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
import { requireInCi } from "./require-in-ci.ts";

const python = trainerPython();
const skip = requireInCi(
  "python3-grpcio python3-grpc-tools python3-numpy",
  python ? null : "no /usr/bin/python3 with grpc and numpy",
);
const torch = python ? spawnSync(python, ["-c", "import torch"]).status === 0 : false;
// Without torch only the tensor tests skip, inside the Python suite: in CI, which installs it, none may.
requireInCi("python3-torch", python && !torch ? "no torch under /usr/bin/python3" : null);

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
