// A long-running server (rlgate serve, rlgate core) outlives one bad promise: an unhandled rejection or an uncaught
// exception is logged with its stack and counted (rlgate_uncaught_errors_total{kind}), and the process goes on
// serving. Node's default would end it with every stream in flight; nothing restarts it.
import { Counter, type Registry } from "prom-client";

export type CrashKind = "unhandledRejection" | "uncaughtException";

/** Installs the guard; returns the function that removes it. */
export function guardProcess(options: { log: (line: string) => void; registry: Registry }): () => void {
  const counter = new Counter({
    name: "rlgate_uncaught_errors_total",
    help: "Unhandled rejections and uncaught exceptions, logged and survived",
    labelNames: ["kind"] as const,
    registers: [options.registry],
  });
  const handler = (kind: CrashKind) => (error: unknown) => {
    counter.inc({ kind });
    try {
      options.log(
        `${kind} (survived, counted in rlgate_uncaught_errors_total): ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
      );
    } catch {
      // A log that fails (a closed stderr) must not turn the guard itself into the crash.
    }
  };
  const onRejection = handler("unhandledRejection");
  const onException = handler("uncaughtException");
  process.on("unhandledRejection", onRejection);
  process.on("uncaughtException", onException);
  return () => {
    process.off("unhandledRejection", onRejection);
    process.off("uncaughtException", onException);
  };
}
