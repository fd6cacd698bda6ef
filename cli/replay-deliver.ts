// `rlgate replay deliver`: stored finished rollouts served again as a trajectory stream, to an RL core.
// Cores dial gateways (the core is the stream's client), so deliver serves the selection the way a gateway does,
// from a snapshot store of just those rollouts, and reports as the core's consumer group acks them. With
// --to-core it asks a running core to dial that stream as a source of its own (deliver-to-core.ts).
import { Command } from "commander";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { keepCoreSource, type CoreSourceKeeper } from "./deliver-to-core.ts";
import { duration } from "./option-parsers.ts";
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
    .summary("stream stored finished rollouts again to an RL core (reproduce a trainer bug on the exact data)")
    .description(
      "Serve the selected finished rollouts again as a trajectory stream, exactly as the gateway delivered them, " +
        "so a core builds the same batches as the first time without re-running a rollout. The rollouts are copied " +
        "into a snapshot store first, in the order they finished.\n\n" +
        "--to-core ADDR: a running core (`rlgate core`, with or without --gateway) is asked to read the stream as a " +
        "source of its own, consumer group --consumer-group (default replay); rollout ids and group names from it " +
        "are prefixed '<namespace>/' (--namespace, default the consumer group) so they never meet the live " +
        "gateway's rollouts of the same ids (--namespace '' keeps them, for a core that has not seen them). " +
        "Delivery is at least once with an exactly-once effect: the core skips a rollout it took already, and a " +
        "core restarted mid-delivery is given the source again.\n\n" +
        "Without --to-core: start a fresh core with `rlgate core --gateway <the address printed>`.\n\n" +
        "Deliver exits once the consumer group has acked every rollout (0), or keeps serving with --keep-serving; " +
        "1 when the core is unreachable or refuses.",
    )
    .argument("[rollouts...]", "rollout ids (or select with --group / --since)")
    .option("--host <host>", "address of the trajectory stream", "127.0.0.1")
    .option(
      "--grpc-port <port>",
      "port of the trajectory stream (0: any free port)",
      (v: string) => (v === "0" ? 0 : positiveInteger(v)),
      8711,
    )
    .option("--to-core <addr>", "a running RL core's trainer address (rlgate core --port): it reads the stream")
    .option("--core-token <token>", "the core's --token", process.env.RLGATE_CORE_TOKEN)
    .option(
      "--core-tls-ca <file>",
      "PEM CA the core's certificate is checked against (TLS; default beyond loopback: system roots)",
    )
    .option("--core-insecure", "dial the core in plaintext even beyond loopback")
    .option("--core-wait <duration>", "how long the core may be unreachable mid-delivery (a restart)", duration, 60_000)
    .option("--advertise <host:port>", "the stream's address as the core dials it (default: the address it listens on)")
    .option(
      "--consumer-group <name>",
      "the consumer group whose acks end the delivery (default: rl-core, or replay with --to-core)",
    )
    .option(
      "--namespace <name>",
      "--to-core: prefix of rollout ids and groups in the core (default: the consumer group)",
    )
    .option("--keep-serving", "keep serving after every rollout was acked (until interrupted)")
    .option("--snapshot <dir>", "where to write the snapshot store (default: a temporary directory, removed at exit)");
  withSourceOptions(command);
  withSelectionOptions(command);
  return command.action((ids: string[], opts: SourceCliOptions & Record<string, any>) =>
    runCommand(async () => {
      const selection = selectionOf(ids, opts);
      const toCore: string | undefined = opts["toCore"];
      const consumerGroup: string = opts["consumerGroup"] ?? (toCore ? "replay" : "rl-core");
      const [{ writeSnapshot }, { startGateway }, { CoreSourcesClient }] = await Promise.all([
        import("../replay/snapshot.ts"),
        import("../gateway/index.ts"),
        import("../clients/ts/core-sources-client.ts"),
      ]);
      const source = await sourceOf(opts);
      const temporary = !opts["snapshot"];
      const dir = opts["snapshot"] ?? mkdtempSync(join(tmpdir(), "rlgate-deliver-"));
      let gateway: Awaited<ReturnType<typeof startGateway>> | null = null;
      let keeper: CoreSourceKeeper | null = null;
      const core = toCore
        ? new CoreSourcesClient(toCore, {
            token: opts["coreToken"],
            tls: { ca: opts["coreTlsCa"], insecure: opts["coreInsecure"] },
          })
        : null;
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
        const address = opts["advertise"] ?? gateway.grpc!.address;
        console.log(
          `rlgate replay deliver: ${snapshot.rollouts} finished rollouts (${snapshot.calls} calls) on grpc://${address}`,
        );
        if (core) {
          const namespace: string = opts["namespace"] ?? consumerGroup;
          keeper = await keepCoreSource(
            core,
            { address, consumerGroup, namespace, token: opts["token"] ?? "" },
            { waitMs: opts["coreWait"], log: (line) => console.error(`rlgate replay deliver: ${line}`) },
          );
          console.log(
            `  the RL core at ${core.address} reads it as consumer group '${consumerGroup}'` +
              (namespace ? `, rollout ids and groups prefixed '${namespace}/'` : ", rollout ids as they are"),
          );
        } else console.log(`  start a fresh core:  rlgate core --gateway ${address} --data <a new directory>`);
        const last = snapshot.cursors.at(-1)!;
        const store = gateway.context.store;
        const ackBar = progressBar(`acked by ${consumerGroup}`, snapshot.rollouts);
        let acked = 0;
        const stop = new Promise<void>((resolve) => {
          process.once("SIGINT", resolve);
          process.once("SIGTERM", resolve);
        });
        let interrupted = false;
        void stop.then(() => (interrupted = true));
        const lost = keeper ? keeper.failed : new Promise<never>(() => {});
        try {
          while (!interrupted) {
            const committed = store.getCursor(consumerGroup);
            const now = snapshot.cursors.filter((c) => c <= committed).length;
            for (; acked < now; acked++) ackBar.tick();
            if (committed >= last && !opts["keepServing"]) break;
            await Promise.race([new Promise((r) => setTimeout(r, 200)), stop, lost]);
          }
        } finally {
          ackBar.stop();
        }
        console.log(
          interrupted
            ? `stopped: ${acked} of ${snapshot.rollouts} rollouts acked by ${consumerGroup}`
            : `delivered: all ${snapshot.rollouts} rollouts acked by ${consumerGroup}` +
                (core ? ` (the RL core at ${core.address})` : ""),
        );
        return interrupted && acked < snapshot.rollouts ? 1 : 0;
      } finally {
        await keeper?.stop();
        core?.close();
        await gateway?.close();
        await source.close().catch(() => {});
        if (temporary) rmSync(dir, { recursive: true, force: true });
      }
    }),
  );
}
