// The process's one logger, made here by the CLI and handed to what it starts (the gateway's context, the core):
// pino's JSON lines when stderr (where logs go; stdout carries the command's own output) is not a terminal, so a
// log collector reads them as they are, and pino-pretty's readable lines on a terminal. RLGATE_LOG_FORMAT=json|pretty
// chooses otherwise; RLGATE_LOG_LEVEL sets the level (default info).
import { pino, type Logger } from "pino";
import pretty from "pino-pretty";

export type { Logger } from "pino";
export type LogFormat = "json" | "pretty";

export interface LoggerOptions {
  /** Where lines go; default stderr. */
  destination?: NodeJS.WritableStream & { isTTY?: boolean };
  format?: LogFormat;
  level?: string;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const destination = options.destination ?? process.stderr;
  const envFormat = process.env.RLGATE_LOG_FORMAT;
  const format =
    options.format ??
    (envFormat === "json" || envFormat === "pretty" ? envFormat : destination.isTTY ? "pretty" : "json");
  const level = options.level ?? process.env.RLGATE_LOG_LEVEL ?? "info";
  if (format === "json") return pino({ level, base: { pid: process.pid } }, destination);
  const stream = pretty({
    destination,
    colorize: destination.isTTY === true,
    translateTime: "SYS:HH:MM:ss.l",
    ignore: "pid,hostname",
    sync: true,
  });
  return pino({ level }, stream);
}

/** A logger that writes nothing (the default of library entry points; tests). */
export const silentLogger: Logger = pino({ level: "silent" });

/** For parts that take a line logger (`(line) => void`): each line an info record of `logger`. */
export function lineLogger(logger: Logger, level: "info" | "warn" | "error" = "info"): (line: string) => void {
  return (line) => logger[level](line);
}
