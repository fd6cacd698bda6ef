// The one-prompt Qwen Code session the e2e tests run through rlgate against the sim: the prompt and the scripted turns
// that answer it. How the CLI is launched (its settings, its offline switches) is the registry's
// (runner/harnesses/qwen-code.ts; QWEN_CODE_NOTES.md says why each is set).
import type { ScriptTurn } from "../../sim/index.ts";

/** Kill qwen if it has not exited by then (a normal run takes ~10-15 s; qwen retries 5xx for minutes). */
export const QWEN_TIMEOUT_MS = 120_000;

export const PROOF_FILE = "proof.txt";
export const PROOF_TEXT = "rlgate-e2e";
export const SHELL_COMMAND = `echo ${PROOF_TEXT} > ${PROOF_FILE}`;
export const FINAL_TEXT = `Done: ${PROOF_FILE} now holds ${PROOF_TEXT}.`;
export const PROMPT = `Use the shell to write the word ${PROOF_TEXT} into ${PROOF_FILE}.`;

export const SHELL_TURN: ScriptTurn = {
  reasoning: "The user wants a file written with the shell. I will run one echo command.",
  tool_calls: [
    { name: "run_shell_command", arguments: { command: SHELL_COMMAND, description: "Write the proof file" } },
  ],
};
// The sim plays script[k], k = assistant messages already in the request. Qwen's first request already holds one: its
// canned startup-context reply ("Got it. Thanks for the context!"). So script[1] is the first sampled turn; script[0]
// only plays if that context is ever skipped, and then repeats the (idempotent) shell call.
export const SCRIPT: ScriptTurn[] = [
  SHELL_TURN,
  SHELL_TURN,
  { reasoning: "The command exited with code 0, so the file is written.", content: FINAL_TEXT },
];
