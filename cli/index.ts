// The `rlgate` command line: one sub-command per job.
import { Command } from "commander";
import { coreCommand } from "./core-command.ts";
import { exportCommand } from "./export-command.ts";
import { harnessCheckCommand } from "./harness-check-command.ts";
import { replayCommand } from "./replay-command.ts";
import { runCommand } from "./run-command.ts";
import { doctorCommand } from "./doctor-command.ts";
import { serveCommand } from "./serve-command.ts";
import { showCommand } from "./show-command.ts";
import { simCommand } from "./sim-command.ts";
import { storeCommand } from "./store-command.ts";
import { StartRefusal } from "../util/refusal.ts";
import { humanDefaults } from "./help-defaults.ts";

const program = new Command()
  .name("rlgate")
  .description(
    "Capture gateway for RL on agent harnesses: point a harness at rlgate instead of vLLM/SGLang, and every call is " +
      "recorded with the exact token ids and logprobs the model saw and sampled.",
  )
  .version("0.1.0")
  .showHelpAfterError()
  .addCommand(serveCommand())
  .addCommand(simCommand())
  .addCommand(showCommand())
  .addCommand(coreCommand())
  .addCommand(runCommand())
  .addCommand(harnessCheckCommand())
  .addCommand(replayCommand())
  .addCommand(exportCommand())
  .addCommand(storeCommand())
  .addCommand(doctorCommand());
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
