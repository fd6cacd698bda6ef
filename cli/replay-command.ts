// `rlgate replay`: debugging against recorded data — score captured completions on another server, re-send recorded
// calls, re-deliver stored rollouts to an RL core.
import { Command } from "commander";
import { replayDeliverCommand } from "./replay-deliver.ts";
import { replayResendCommand } from "./replay-resend.ts";
import { replayScoreCommand } from "./replay-score.ts";

export function replayCommand(): Command {
  return new Command("replay")
    .summary("score, re-send or re-deliver captured rollouts (does the server still agree? reproduce a trainer bug)")
    .description(
      "Replay what rlgate captured: `score` scores captured completions teacher-forced on an inference server and " +
        "reports per-token logprob drift; `resend` re-sends recorded calls and compares prompt ids, sampled ids and " +
        "answers; `deliver` serves stored finished rollouts again to a fresh RL core.",
    )
    .addCommand(replayScoreCommand())
    .addCommand(replayResendCommand())
    .addCommand(replayDeliverCommand());
}
