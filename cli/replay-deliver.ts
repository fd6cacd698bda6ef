// `rlgate replay deliver`: stored finished rollouts served again as a trajectory stream, for a fresh RL core.
// Cores dial gateways (the core is the stream's client), so deliver serves the selection the way a gateway does,
// from a snapshot store of just those rollouts, and reports as the core's consumer group acks them.
import { Command } from "commander";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { progressBar } from "./progress.ts";
import {
  positiveInteger,
  runCommand,
  selectionOf,
  sourceOf,
  withSelectionOptions,
  withSourceOptions,
  type SourceCliOptions,
} from "./replay-options.ts";

export function replayDeliverCommand(): Command {
  const command = new Command("deliver")
    .summary("serve stored finished rollouts again to a fresh RL core (reproduce a trainer bug on the exact data)")
    .description(
      "Serve the selected finished rollouts again as a trajectory stream, exactly as the gateway delivered them: " +
        "start a fresh core with `rlgate core --gateway <the address printed>` (its consumer group starts from the " +
        "beginning) and it builds the same batches as the first time, without re-running a rollout. The rollouts " +
        "are copied into a snapshot store first, in the order they finished; deliver exits once the core's consumer " +
        "group has acked them all (--consumer-group), or keeps serving with --keep-serving.",
    )
    .argument("[rollouts...]", "rollout ids (or select with --group / --since)")
    .option("--host <host>", "address of the trajectory stream", "127.0.0.1")
    .option(
      "--grpc-port <port>",
      "port of the trajectory stream (0: any free port)",
      (v: string) => (v === "0" ? 0 : positiveInteger(v)),
      8711,
    )
    .option("--consumer-group <name>", "the core's consumer group, whose acks end the delivery", "rl-core")
    .option("--keep-serving", "keep serving after every rollout was acked (until interrupted)")
    .option("--snapshot <dir>", "where to write the snapshot store (default: a temporary directory, removed at exit)");
  withSourceOptions(command);
  withSelectionOptions(command);
  return command.action((ids: string[], opts: SourceCliOptions & Record<string, any>) =>
    runCommand(async () => {
      const selection = selectionOf(ids, opts);
      const [{ writeSnapshot }, { startGateway }] = await Promise.all([
        import("../replay/snapshot.ts"),
        import("../gateway/index.ts"),
      ]);
      const source = await sourceOf(opts);
      const temporary = !opts["snapshot"];
      const dir = opts["snapshot"] ?? mkdtempSync(join(tmpdir(), "rlgate-deliver-"));
      let gateway: Awaited<ReturnType<typeof startGateway>> | null = null;
      try {
        const rollouts = await source.select({ ...selection, finishedOnly: true });
        if (rollouts.length === 0) throw new Error(`no finished rollout in ${source.where} matches the selection`);
        const copyBar = progressBar("copying", rollouts.length);
        const snapshot = await writeSnapshot(source, rollouts, dir, () => copyBar.tick()).finally(() => copyBar.stop());
        await source.close();
        // A gateway over the snapshot serves the stream; its HTTP side (on a free port) answers the control API, and
        // no harness is pointed at it.
        gateway = await startGateway({
          upstream: "http://127.0.0.1:9",
          dataDir: dir,
          host: opts["host"],
          port: 0,
          grpcPort: opts["grpcPort"],
          controlToken: opts["token"],
        });
        const address = gateway.grpc!.address;
        console.log(
          `rlgate replay deliver: ${snapshot.rollouts} finished rollouts (${snapshot.calls} calls) on grpc://${address}`,
        );
        console.log(`  start a fresh core:  rlgate core --gateway ${address} --data <a new directory>`);
        const last = snapshot.cursors.at(-1)!;
        const store = gateway.context.store;
        const ackBar = progressBar(`acked by ${opts["consumerGroup"]}`, snapshot.rollouts);
        let acked = 0;
        const stop = new Promise<void>((resolve) => {
          process.once("SIGINT", resolve);
          process.once("SIGTERM", resolve);
        });
        let interrupted = false;
        void stop.then(() => (interrupted = true));
        while (!interrupted) {
          const committed = store.getCursor(opts["consumerGroup"]);
          const now = snapshot.cursors.filter((c) => c <= committed).length;
          for (; acked < now; acked++) ackBar.tick();
          if (committed >= last && !opts["keepServing"]) break;
          await Promise.race([new Promise((r) => setTimeout(r, 200)), stop]);
        }
        ackBar.stop();
        console.log(
          interrupted
            ? `stopped: ${acked} of ${snapshot.rollouts} rollouts acked by ${opts["consumerGroup"]}`
            : `delivered: all ${snapshot.rollouts} rollouts acked by ${opts["consumerGroup"]}`,
        );
        return interrupted && acked < snapshot.rollouts ? 1 : 0;
      } finally {
        await gateway?.close();
        await source.close().catch(() => {});
        if (temporary) rmSync(dir, { recursive: true, force: true });
      }
    }),
  );
}
