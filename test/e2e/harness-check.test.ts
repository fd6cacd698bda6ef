// `rlgate harness-check` on a user's own command line: the real Qwen Code CLI given as a template (no preset, none of
// the preset's settings), its shell tool named, through a tokens-mode gateway in front of the sim. The table it prints
// says what the matrix says of the qwen-code preset: the task done, one main trajectory, no break, every sampled token
// trained once; the command exits 0.
import assert from "node:assert/strict";
import { test } from "node:test";
import { QWEN_CODE } from "../../runner/harnesses/qwen-code.ts";
import { runCli } from "../helpers.ts";
import { cliSkip } from "./harnesses.ts";

test(
  "harness-check runs a command line through the scripted session and prints its trajectories",
  { skip: cliSkip(QWEN_CODE), timeout: 400_000 },
  async () => {
    const { code, stdout, stderr } = await runCli(
      [
        "harness-check",
        "qwen -m {model} -p {prompt} --yolo --auth-type openai",
        "--shell-tool",
        "run_shell_command",
        "--canned-turns",
        "1",
        "--prompts",
        "tokens",
      ],
      360_000,
    );
    const diag = `${stdout}\n${stderr}`;
    assert.equal(code, 0, diag);
    const row = stdout.split("\n").find((l) => l.includes("main, tokens"));
    assert.ok(row, diag);
    const cells = row.split("|").map((c) => c.trim());
    // | harness | session | task | calls ok | trajectories per segment | breaks | amplif. | trained/sampled |
    assert.equal(cells[1], "custom");
    assert.equal(cells[3], "ok", diag);
    assert.match(cells[4]!, /^(\d+)\/\1$/, diag);
    assert.equal(cells[5], "main 1", diag);
    assert.equal(cells[6], "none", diag);
    assert.equal(cells[7], "1.000", diag);
    assert.match(cells[8]!, /^(\d+)\/\1 = 1\.000$/, diag);
    assert.doesNotMatch(stdout, /hint:/, diag);
  },
);
