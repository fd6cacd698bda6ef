// `rlgate store stats` and `rlgate store backup DIR`: what a store holds, and a consistent copy of it, both while a
// gateway serves it. The store is opened read-only: LMDB readers never block its writer, and a copy is made from one
// read snapshot (mdb_env_copy2), so it holds exactly the transactions committed when it started.
import { Command } from "commander";
import { existsSync, mkdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { openStoreTablesReadOnly, type StoreTables } from "../store/store-tables.ts";
import { storeStats, type StoreStats } from "../store/store-stats.ts";
import { StartRefusal } from "../util/refusal.ts";
import { duration } from "./option-parsers.ts";
import { table } from "./table.ts";

const DATA_HELP = "directory of the LMDB store (as serve's --data)";
const defaultData = () => process.env.RLGATE_DATA ?? ".rlgate/data";

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["kB", "MB", "GB", "TB"];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}

/** A span as its largest sensible unit: 45s, 90m, 12.0h, 7.0d. */
export function formatAge(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  if (s < 120) return `${s.toFixed(0)}s`;
  if (s < 7200) return `${(s / 60).toFixed(0)}m`;
  if (s < 172_800) return `${(s / 3600).toFixed(1)}h`;
  return `${(s / 86_400).toFixed(1)}d`;
}

/** A store's tables opened read-only; a directory without a store is the user's to fix: said in one sentence. */
function openTables(path: string): StoreTables {
  if (!existsSync(join(path, "data.mdb")))
    throw new StartRefusal(`no store at ${path} (no data.mdb there): pass --data`);
  return openStoreTablesReadOnly(path);
}

function withTables<T>(dir: string, fn: (t: StoreTables, path: string) => T): T {
  const path = resolve(dir);
  const t = openTables(path);
  try {
    return fn(t, path);
  } finally {
    void t.root.close();
  }
}

export function formatStats(s: StoreStats, now = Date.now()): string {
  const lines = [
    `store ${s.path}`,
    `  rollouts:   ${s.rollouts.open} open, ${s.rollouts.finished} finished`,
    `  calls:      ${s.calls.total}${s.calls.unattributed > 0 ? ` (${s.calls.unattributed} unattributed)` : ""}`,
    `  oldest:     ${s.oldestRollout ? `${s.oldestRollout.id}, created ${new Date(s.oldestRollout.createdAt).toISOString()} (${formatAge(now - s.oldestRollout.createdAt)} ago)` : "—"}`,
    `  bytes:      ${formatBytes(s.bytes.live)} in use, ${formatBytes(s.bytes.free)} free to reuse, ${formatBytes(s.bytes.used)} high-water mark, file ${formatBytes(s.bytes.file)}`,
  ];
  if (s.consumers.length === 0)
    lines.push("  consumers:  none yet (retention removes nothing until a consumer group has acknowledged rollouts)");
  else {
    lines.push("  consumer groups:");
    const rows = s.consumers.map((c) => [
      c.name,
      c.lag,
      c.committedAt === null
        ? "nothing yet"
        : `${new Date(c.committedAt).toISOString()} (${formatAge(now - c.committedAt)} ago)`,
      c.holdsRetention ? "yes" : "",
    ]);
    lines.push(
      table(["group", "lag (rollouts)", "acknowledged up to", "holds retention"], rows)
        .split("\n")
        .map((l) => `    ${l}`)
        .join("\n"),
    );
  }
  const r = s.retention;
  if (r) {
    lines.push(
      `  retention ${formatAge(r.retainMs)}: would remove ${r.rollouts} rollout(s) with ${r.calls} call(s) now, and ${r.unattributedCalls} unattributed call(s)` +
        (r.keptBackbones > 0 ? `; ${r.keptBackbones} backbone(s) kept for open branches` : ""),
    );
    if (r.heldBy !== null)
      lines.push(
        `    held by consumer group '${r.heldBy}': it has not acknowledged rollouts older than the window, and keeps them until it does (connect a core with --consumer-group ${r.heldBy})`,
      );
  }
  return lines.join("\n");
}

function statsCommand(): Command {
  return new Command("stats")
    .description(
      "what the store holds: rollouts open and finished, calls, bytes in use against the file and the free pages LMDB reuses, the oldest rollout, each consumer group's lag, and (with --retain) what retention would remove now. Safe while a gateway serves the store",
    )
    .option("--data <dir>", DATA_HELP, defaultData())
    .option("--retain <duration>", "count what `serve --retain <duration>` would remove now (e.g. 7d)", duration)
    .option("--json", "print the figures as JSON", false)
    .action((opts: { data: string; retain?: number; json: boolean }) => {
      const stats = withTables(opts.data, (t, path) => storeStats(t, path, { retainMs: opts.retain }));
      console.log(opts.json ? JSON.stringify(stats, null, 2) : formatStats(stats));
    });
}

/** Copies the store into `target` while a gateway may write it; prints progress on stderr and what was copied. */
export async function backupStore(
  dataDir: string,
  target: string,
  options: { compact: boolean; progress?: (line: string, final: boolean) => void },
): Promise<{ bytes: number; ms: number; rollouts: number; calls: number }> {
  const source = resolve(dataDir);
  const dest = resolve(target);
  if (existsSync(join(dest, "data.mdb")))
    throw new StartRefusal(`${dest} already holds a store (data.mdb): choose an empty directory`);
  const t = openTables(source);
  mkdirSync(dest, { recursive: true });
  const expected = storeStats(t, source).bytes[options.compact ? "live" : "used"];
  const started = performance.now();
  const say = options.progress ?? (() => {});
  const poll = setInterval(() => {
    const done = existsSync(join(dest, "data.mdb")) ? statSync(join(dest, "data.mdb")).size : 0;
    say(`backup: ${formatBytes(done)} of about ${formatBytes(expected)} written`, false);
  }, 500);
  try {
    await t.root.backup(dest, options.compact);
  } finally {
    clearInterval(poll);
    await t.root.close();
  }
  const ms = performance.now() - started;
  const bytes = statSync(join(dest, "data.mdb")).size;
  // The copy is read back: it opens, and its counts are what it holds.
  const counts = withTables(dest, (copy) => ({
    rollouts: copy.rollouts.getCount(),
    calls: copy.calls.getCount(),
  }));
  say(
    `backup: ${join(dest, "data.mdb")}, ${formatBytes(bytes)}${options.compact ? " (compacted)" : ""}, ${counts.rollouts} rollouts, ${counts.calls} calls, in ${(ms / 1000).toFixed(1)} s`,
    true,
  );
  return { bytes, ms, ...counts };
}

function backupCommand(): Command {
  return new Command("backup")
    .description(
      "a consistent copy of the store into DIR (an empty or new directory), made while a gateway serves it: the copy holds every transaction committed when it started. Serve it with --data DIR. While it runs, the gateway cannot reuse pages freed after it started (the file may grow by what is written meanwhile)",
    )
    .argument("<dir>", "where the copy goes (its data.mdb)")
    .option("--data <dir>", DATA_HELP, defaultData())
    .option(
      "--no-compact",
      "copy pages as they are, free ones included (faster; the copy is as large as the file's used part)",
    )
    .action(async (dir: string, opts: { data: string; compact: boolean }) => {
      const tty = process.stderr.isTTY;
      await backupStore(opts.data, dir, {
        compact: opts.compact,
        progress: (line, final) => {
          if (tty) process.stderr.write(`\r\x1b[2K${line}${final ? "\n" : ""}`);
          else if (final) console.error(line);
        },
      });
    });
}

export function storeCommand(): Command {
  return new Command("store")
    .summary("a store's figures (stats) and a consistent copy of it (backup), while a gateway serves it")
    .description(
      "Work on a store beside the gateway that serves it (read-only, never in its way). Retention of old rollouts is `rlgate serve --retain`.",
    )
    .addCommand(statsCommand())
    .addCommand(backupCommand());
}
