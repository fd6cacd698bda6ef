// How `--help` states defaults, for every command at once: a duration option's default as a duration ("1h", not
// "3600000"), a size as a size ("1tb", not "1099511627776"), and an empty list as "none". Commander prints a default
// from its value unless told how.
import type { Command } from "commander";
import { bytes, duration } from "./option-parsers.ts";

const UNITS: Array<[string, number]> = [
  ["d", 86_400_000],
  ["h", 3_600_000],
  ["m", 60_000],
  ["s", 1000],
];

/** 4200000 → "1h10m", 1500 → "1.5s", 250 → "250ms", 0 → "0". */
export function formatDuration(ms: number): string {
  if (ms === 0) return "0";
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60_000) return `${ms / 1000}s`;
  let left = ms;
  let out = "";
  for (const [unit, size] of UNITS) {
    const n = Math.floor(left / size);
    if (n > 0) out += `${n}${unit}`;
    left -= n * size;
  }
  return left ? `${out}${left}ms` : out;
}

/** 1099511627776 → "1tb", 67108864 → "64mb", 1000 → "1000b": the largest unit that divides it. */
export function formatBytes(n: number): string {
  for (const [unit, size] of [
    ["tb", 1024 ** 4],
    ["gb", 1024 ** 3],
    ["mb", 1024 ** 2],
    ["kb", 1024],
  ] as const)
    if (n > 0 && n % size === 0) return `${n / size}${unit}`;
  return `${n}b`;
}

export function humanDefaults(command: Command): Command {
  for (const option of command.options) {
    if (option.defaultValueDescription !== undefined) continue;
    const value: unknown = option.defaultValue;
    if (option.parseArg === duration && typeof value === "number")
      option.defaultValueDescription = formatDuration(value);
    else if (option.parseArg === bytes && typeof value === "number")
      option.defaultValueDescription = formatBytes(value);
    else if (Array.isArray(value) && value.length === 0) option.defaultValueDescription = "none";
  }
  for (const sub of command.commands) humanDefaults(sub);
  return command;
}
