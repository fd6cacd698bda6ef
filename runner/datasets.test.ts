// The SWE-bench loader and the test-log verdicts, on rows and logs shaped like SWE-bench's own.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadSwebench, patchedFiles } from "./datasets.ts";
import { parseTestLog, testOutcomes } from "./datasets-test-log.ts";

const PATCH = `diff --git a/tests/test_calc.py b/tests/test_calc.py
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -1 +1,2 @@
+def test_add(): assert add(1, 2) == 3
diff --git a/tests/it's.py b/tests/it's.py
new file mode 100644
`;

function jsonl(rows: unknown[]): string {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-swebench-"));
  const file = join(dir, "rows.jsonl");
  writeFileSync(file, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
  return file;
}

test("a SWE-bench row becomes an image task: prompt, test patch, reverted paths, tests-based reward", () => {
  const file = jsonl([
    {
      instance_id: "calc__calc-1",
      image: "localhost/calc:1",
      problem_statement: "  add() subtracts\n",
      // As SWE-bench publishes them: JSON strings of lists.
      FAIL_TO_PASS: '["tests/test_calc.py::test_add"]',
      PASS_TO_PASS: ["tests/test_calc.py::test_sub"],
      test_patch: PATCH,
      repo: "calc/calc",
    },
    { instance_id: "calc__calc-2", problem_statement: "x", FAIL_TO_PASS: [], test_cmd: "make test" },
  ]);
  const [a, b] = loadSwebench(file, { imageTemplate: "registry.local/sweb.eval.{instance_id}:latest" });
  assert.equal(a!.name, "calc__calc-1");
  assert.equal(a!.prompt, "add() subtracts");
  assert.equal(a!.image, "localhost/calc:1");
  assert.equal(a!.workdir, "/testbed");
  assert.deepEqual(a!.testPaths, ["tests/test_calc.py", "tests/it's.py"]);
  assert.equal(a!.verifier, "python -m pytest -rA 'tests/test_calc.py' 'tests/it'\\''s.py'");
  assert.deepEqual(a!.reward, {
    kind: "tests",
    failToPass: ["tests/test_calc.py::test_add"],
    passToPass: ["tests/test_calc.py::test_sub"],
  });
  assert.equal(b!.image, "registry.local/sweb.eval.calc__calc-2:latest");
  assert.equal(b!.verifier, "make test");
  assert.deepEqual(b!.reward, { kind: "exit_code" }, "no named tests: the test command's status");
  rmSync(join(file, ".."), { recursive: true, force: true });
});

test("bad rows are refused with their line and field", () => {
  const cases: [unknown[], RegExp][] = [
    [[{ instance_id: "a", problem_statement: "x", FAIL_TO_PASS: "not json" }], /rows\.jsonl:1: FAIL_TO_PASS/],
    [[{ instance_id: "a", image: "i", FAIL_TO_PASS: [] }], /:1: problem_statement: Required/],
    [[{ instance_id: "a", problem_statement: "x", FAIL_TO_PASS: [] }], /:1: no "image" \(or give --image-template\)/],
    [
      [
        { instance_id: "a", image: "i", problem_statement: "x", FAIL_TO_PASS: [] },
        { instance_id: "a", image: "i", problem_statement: "x", FAIL_TO_PASS: [] },
      ],
      /:2: instance a appears twice/,
    ],
  ];
  for (const [rows, error] of cases) {
    const file = jsonl(rows);
    assert.throws(() => loadSwebench(file), error);
    rmSync(join(file, ".."), { recursive: true, force: true });
  }
});

test("test logs: pytest -rA summaries, verbose pytest and Django's runner; a missing test did not pass", () => {
  const log = [
    "tests/test_calc.py::test_mul PASSED                                       [ 50%]",
    "\x1b[32mPASSED\x1b[0m tests/test_calc.py::test_add",
    "FAILED tests/test_calc.py::test_sub - AssertionError: assert 0 == 1",
    "XFAIL tests/test_calc.py::test_div - reason",
    "test_clean (forms_tests.tests.FormsTest) ... ok",
    "test_bound (forms_tests.tests.FormsTest) ... FAIL",
  ].join("\n");
  assert.deepEqual(Object.fromEntries(parseTestLog(log)), {
    "tests/test_calc.py::test_mul": "passed",
    "tests/test_calc.py::test_add": "passed",
    "tests/test_calc.py::test_sub": "failed",
    "tests/test_calc.py::test_div": "passed",
    "test_clean (forms_tests.tests.FormsTest)": "passed",
    "test_bound (forms_tests.tests.FormsTest)": "failed",
  });
  const pass = testOutcomes(log, {
    kind: "tests",
    failToPass: ["tests/test_calc.py::test_add", "test_clean (forms_tests.tests.FormsTest)"],
    passToPass: ["tests/test_calc.py::test_mul"],
  });
  assert.equal(pass.passed, true);
  const fail = testOutcomes(log, {
    kind: "tests",
    failToPass: ["tests/test_calc.py::test_add"],
    passToPass: ["tests/test_calc.py::test_sub", "tests/test_calc.py::test_gone"],
  });
  assert.deepEqual(fail.notPassed, [
    { test: "tests/test_calc.py::test_sub", status: "failed" },
    { test: "tests/test_calc.py::test_gone", status: "missing" },
  ]);
});

test("patchedFiles reads the b/ side of each file header", () => {
  assert.deepEqual(patchedFiles(PATCH), ["tests/test_calc.py", "tests/it's.py"]);
});
