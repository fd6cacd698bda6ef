import assert from "node:assert/strict";
import { test } from "node:test";
import type { CallRecord } from "../../store/records.ts";
import { harnessHint } from "../harness-check-command.ts";
import { offeredTools } from "./offered-tools.ts";

test("the tools a request offered, in each API's shape", () => {
  assert.deepEqual(offeredTools({ tools: [{ type: "function", function: { name: "run_shell_command" } }] }), [
    "run_shell_command",
  ]);
  assert.deepEqual(
    offeredTools({
      tools: [
        { name: "Bash", input_schema: {} },
        { type: "function", name: "exec" },
      ],
    }),
    ["Bash", "exec"],
  );
  assert.deepEqual(offeredTools({ tools: [{ functionDeclarations: [{ name: "read_file" }, { name: "ls" }] }] }), [
    "read_file",
    "ls",
  ]);
  assert.deepEqual(offeredTools({ messages: [] }), []);
  assert.deepEqual(offeredTools(null), []);
});

test("a hint names the offered tools when the scripted shell tool is not among them, and says when no call came at all", () => {
  const calls = [{ requestReceived: { tools: [{ function: { name: "run_shell_command" } }] } }] as CallRecord[];
  const scripting = (name: string) => ({ shell: (command: string) => ({ name, arguments: { command } }) });
  assert.match(
    harnessHint(calls, scripting("bash"))!,
    /'bash', which the harness did not offer; it offered: run_shell_command/,
  );
  assert.equal(harnessHint(calls, scripting("run_shell_command")), null);
  assert.match(harnessHint([], scripting("bash"))!, /made no call through rlgate: point it at \{base_url\}/);
});
