// The parsers of the CLI's option values, one of each kind for every command: a duration is always written the same
// way (`500ms`, `5s`, `10m`, `1h`, `7d`; a plain number is milliseconds), a size too (`100mb`, `512kb`, a plain number is
// bytes).
import { InvalidArgumentError } from "commander";

export function integer(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("expected a non-negative integer");
  return n;
}

export function nonNegative(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError("expected a non-negative number");
  return n;
}

export function probability(value: string): number {
  const n = Number(value);
  if (!(n >= 0 && n <= 1)) throw new InvalidArgumentError("expected a probability between 0 and 1");
  return n;
}

const DURATION_UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** A duration in milliseconds: `500ms`, `5s`, `1.5s`, `10m`, `1h`, `7d`, or a plain number of milliseconds. */
export function duration(value: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/.exec(value.trim());
  if (!match)
    throw new InvalidArgumentError(
      "expected a duration such as 500ms, 30s, 2m, 1h or 7d (a plain number is milliseconds)",
    );
  return Number(match[1]) * DURATION_UNITS[(match[2] ?? "ms") as keyof typeof DURATION_UNITS];
}

/** A size in bytes: `100mb`, `512kb`, `1gb`, or a plain number of bytes. */
export function bytes(value: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb)?$/i.exec(value.trim());
  if (!match) throw new InvalidArgumentError("expected a size such as 100mb, 512kb or 1048576");
  const unit = (match[2] ?? "b").toLowerCase();
  const scale = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3, tb: 1024 ** 4 }[unit as "b"];
  return Math.floor(Number(match[1]) * scale);
}
