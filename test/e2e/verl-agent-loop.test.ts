// End to end: rlgate_client.verl_agent_loop (run_harness, and RlgateHarnessAgentLoop against a stand-in of verl's
// agent loop module) runs real harnesses through the gateway in front of the sim: the toy harness of examples/verl
// (chat completions with a shell tool), the Qwen Code CLI (a devDependency; skipped when absent), a harness that exits
// non-zero, one that sleeps past its timeout, and failing graders. The Python side (clients/python/tests/
// test_verl_agent_loop.py) checks that what verl gets is the gateway's trajectory token for token: prompt_ids +
// response_ids its token ids, response_mask its trained tokens, the logprobs its logprobs, the trained tokens the calls'
// sampled ids; and the rollout's finish (status, reward). verl itself is not installable here.
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { ScriptTurn } from "../../sim/index.ts";
import { ROOT, startStack, type Stack } from "../helpers.ts";
import { requireInCi } from "../require-in-ci.ts";

const python = process.env.RLGATE_PYTHON ?? "/usr/bin/python3";
const skip = requireInCi(
  "python3-numpy",
  spawnSync(python, ["-c", "import numpy"]).status === 0 ? null : `${python} with numpy is not available`,
);
const QWEN_CLI = join(ROOT, "node_modules", "@qwen-code", "qwen-code", "cli.js");
const QWEN_PRESENT = existsSync(QWEN_CLI);
// Without the CLI only its Python test skips: in CI, where npm install puts it, that fails instead.
requireInCi("the qwen CLI (a devDependency: npm install)", QWEN_PRESENT ? null : `qwen absent (${QWEN_CLI})`);

// As test/e2e/qwen-code.test.ts: the sim plays script[k], k = assistant messages in the request. The toy harness's
// first request holds none (shell call, shell call again, answer: three calls); Qwen's holds its canned context reply
// (shell call, answer).
const SHELL_TURN: ScriptTurn = {
  reasoning: "The user wants a file written with the shell. I will run one echo command.",
  tool_calls: [
    {
      name: "run_shell_command",
      arguments: { command: "echo rlgate-e2e > proof.txt", description: "Write the proof" },
    },
  ],
};
const SCRIPT: ScriptTurn[] = [
  SHELL_TURN,
  SHELL_TURN,
  {
    reasoning: "The command exited with code 0, so the file is written.",
    content: "Done: proof.txt holds rlgate-e2e.",
  },
];

let stack: Stack;

before(async () => {
  if (!skip) stack = await startStack({ sim: { script: SCRIPT } });
});

after(async () => {
  await stack?.close();
});

test(
  "run_harness and RlgateHarnessAgentLoop return what the gateway captured",
  { skip, timeout: 1_200_000 },
  async () => {
    // Asynchronously: the gateway answers the harnesses from this process.
    const out = await new Promise<string>((resolve) => {
      execFile(
        python,
        ["-m", "unittest", "-v", "tests/test_verl_agent_loop.py"],
        {
          cwd: join(ROOT, "clients", "python"),
          env: {
            ...process.env,
            PYTHONPATH: join(ROOT, "clients", "python"),
            RLGATE_TEST_GATEWAY_URL: stack.gateway.url,
            RLGATE_TEST_QWEN_CLI: QWEN_PRESENT ? QWEN_CLI : "",
            RLGATE_TEST_NODE: process.execPath,
          },
          maxBuffer: 64 * 1024 * 1024,
          timeout: 1_100_000,
        },
        (error, stdout, stderr) => resolve(`${stdout}\n${stderr}\n${error ? `exit: ${error.message}` : ""}`),
      );
    });
    assert.match(out, /\nOK( \(skipped=\d+\))?\n/, out);
    const ran = /Ran (\d+) tests?/.exec(out);
    assert.ok(ran && Number(ran[1]) >= 12, out);
    const skipped = [...out.matchAll(/skipped '([^']*)'/g)].map((m) => m[1]);
    // Only the Qwen Code test may skip, and only when the CLI is absent.
    assert.deepEqual(
      skipped,
      QWEN_PRESENT ? [] : ["RLGATE_TEST_QWEN_CLI is not set (the Qwen Code CLI, a devDependency)"],
      out,
    );
  },
);
