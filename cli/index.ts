// The `rlgate` command line: one sub-command per job.
import { Command } from "commander";
import { StartRefusal } from "../util/refusal.ts";
import { humanDefaults } from "./help-defaults.ts";

/**
 * Each sub-command's module, loaded only when it runs: `run` and `serve` load the gateway, the sim, the runner and
 * tokenizers (seconds), which `rlgate show` or `rlgate export` never need. `rlgate --help` (or no sub-command, or an
 * unknown one, which commander answers with the closest name) loads them all, in this order, to list them.
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  serve: async () => (await import("./serve-command.ts")).serveCommand(),
  sim: async () => (await import("./sim-command.ts")).simCommand(),
  show: async () => (await import("./show-command.ts")).showCommand(),
  core: async () => (await import("./core-command.ts")).coreCommand(),
  run: async () => (await import("./run-command.ts")).runCommand(),
  "harness-check": async () => (await import("./harness-check-command.ts")).harnessCheckCommand(),
  replay: async () => (await import("./replay-command.ts")).replayCommand(),
  export: async () => (await import("./export-command.ts")).exportCommand(),
  store: async () => (await import("./store-command.ts")).storeCommand(),
  doctor: async () => (await import("./doctor-command.ts")).doctorCommand(),
};

const program = new Command()
  .name("rlgate")
  .description(
    "Capture gateway for RL on agent harnesses: point a harness at rlgate instead of vLLM/SGLang, and every call is " +
      "recorded with the exact token ids and logprobs the model saw and sampled.",
  )
  .version("0.1.0")
  .showHelpAfterError();
const asked = process.argv[2] ?? "";
const load = Object.hasOwn(COMMANDS, asked)
  ? [asked]
  : ["-V", "--version"].includes(asked)
    ? []
    : Object.keys(COMMANDS);
for (const command of await Promise.all(load.map((name) => COMMANDS[name]!()))) program.addCommand(command);
humanDefaults(program);

/** A failure to listen, said plainly (which address, why, what to change) instead of a stack trace. */
function listenFailure(error: unknown): string | null {
  const e = error as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e?.syscall !== "listen") return null;
  const where = `${e.address ?? "?"}:${e.port ?? "?"}`;
  if (e.code === "EADDRINUSE")
    return `${where} is already in use (another rlgate, or another server): choose another port (--port, --grpc-port, --sim-port, --metrics-port) or stop the other process`;
  if (e.code === "EACCES")
    return `not allowed to listen on ${where}: ports below 1024 need privileges; choose another port`;
  if (e.code === "EADDRNOTAVAIL") return `${e.address} is not an address of this machine (--host)`;
  return `cannot listen on ${where}: ${e.message}`;
}

try {
  await program.parseAsync(process.argv);
} catch (error) {
  // A model directory that cannot serve as the chat format, or an unsafe start, is the user's to fix: a sentence.
  const refused = error instanceof StartRefusal || (error as { code?: unknown }).code === "RLGATE_MODEL_FORMAT";
  const plain = refused ? (error as Error).message : listenFailure(error);
  if (plain === null) throw error;
  console.error(`rlgate: ${plain}`);
  process.exit(1);
}
