// SWE-bench-style grading: a rollout passes when every FAIL_TO_PASS and every PASS_TO_PASS test passed in the test
// command's output. Two output formats are read, as SWE-bench's own log parsers read them: pytest's (`-rA` summary
// lines `PASSED id` / `FAILED id - reason`, or verbose `id PASSED [ 10%]`) and Django's runner (`name (module.Class)
// ... ok`). A test absent from the output did not pass. XFAIL counts as passed, as in SWE-bench.
import type { RewardRule } from "./task.ts";

export type TestStatus = "passed" | "failed" | "skipped";

export interface TestsVerdict {
  passed: boolean;
  /** Named tests that did not pass, with what the output said of them ("missing" when nothing). */
  notPassed: { test: string; status: TestStatus | "missing" }[];
  seen: number;
}

const PYTEST_STATUS: Record<string, TestStatus> = {
  PASSED: "passed",
  XFAIL: "passed",
  FAILED: "failed",
  ERROR: "failed",
  XPASS: "failed",
  SKIPPED: "skipped",
};
const DJANGO_STATUS: Record<string, TestStatus> = {
  ok: "passed",
  "expected failure": "passed",
  FAIL: "failed",
  ERROR: "failed",
  "unexpected success": "failed",
};

/** Every test the output reports, with its last status (a rerun overrides an earlier result). */
export function parseTestLog(log: string): Map<string, TestStatus> {
  const out = new Map<string, TestStatus>();
  for (const raw of log.split("\n")) {
    const line = raw.replace(/\x1b\[[0-9;]*m/g, "").trimEnd();
    let m = /^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+)/.exec(line);
    if (m) {
      out.set(m[2]!, PYTEST_STATUS[m[1]!]!);
      continue;
    }
    m = /^(\S+::\S+)\s+(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\b/.exec(line);
    if (m) {
      out.set(m[1]!, PYTEST_STATUS[m[2]!]!);
      continue;
    }
    m = /^(\S+ \([\w.]+\)).* \.\.\. (ok|FAIL|ERROR|expected failure|unexpected success|skipped.*)$/.exec(line);
    if (m) out.set(m[1]!, DJANGO_STATUS[m[2]!] ?? "skipped");
  }
  return out;
}

export function testOutcomes(log: string, rule: Extract<RewardRule, { kind: "tests" }>): TestsVerdict {
  const statuses = parseTestLog(log);
  const notPassed: TestsVerdict["notPassed"] = [];
  for (const test of [...rule.failToPass, ...rule.passToPass]) {
    const status = statuses.get(test);
    if (status !== "passed") notPassed.push({ test, status: status ?? "missing" });
  }
  return { passed: notPassed.length === 0, notPassed, seen: statuses.size };
}
