// The `rlgate` command line: one sub-command per job.
import { Command } from "commander";
import { coreCommand } from "./core-command.ts";
import { serveCommand } from "./serve-command.ts";
import { showCommand } from "./show-command.ts";
import { simCommand } from "./sim-command.ts";

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
  .addCommand(coreCommand());

await program.parseAsync(process.argv);
