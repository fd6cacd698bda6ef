// rlgate sim: a simulated vLLM (>= 0.10.2) serving Qwen3, with the real tokenizer and chat template, hermes tool
// calls, deterministic seeded logprobs, scripted policies, and knobs for latency, faults and logprob noise.
export { startSim } from "./server.ts";
export type { SimOptions, SimServer, SimStats, SimRequestRecord, SimOutcome } from "./server.ts";
export { loadScript, parseScript, ScriptError } from "./script.ts";
export type { ScriptTurn, ScriptToolCall } from "./script.ts";
export { simLogprob } from "./logprobs.ts";
export { SIM_COMMAND } from "./policy.ts";
