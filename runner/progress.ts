// What `rlgate run` shows while it works: on a terminal one live line per running rollout (redrawn in place), otherwise
// one plain line per event; and a summary table at the end.
import type { RolloutResult, Stage } from "./rollout.ts";
import type { RolloutKey, RunEvents } from "./run.ts";

export class Progress {
  readonly #out: NodeJS.WriteStream;
  readonly #tty: boolean;
  readonly #live = new Map<string, { since: number; stage: Stage }>();
  #drawn = 0;
  #done = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(
    readonly total: number,
    out: NodeJS.WriteStream = process.stderr,
  ) {
    this.#out = out;
    this.#tty = Boolean(out.isTTY);
    if (this.#tty) this.#timer = setInterval(() => this.#draw(), 500).unref();
  }

  events(): RunEvents {
    return {
      image: (task, image) =>
        this.#line(
          "error" in image
            ? `image ${task.name}: failed: ${firstLine(image.error)}`
            : `image ${task.name}: ready in ${(image.ms / 1000).toFixed(1)} s`,
        ),
      notice: (message) => this.#line(`rlgate run: ${message}`),
      stage: (key, stage) => {
        const id = label(key);
        if (stage === "done") return;
        const prev = this.#live.get(id);
        this.#live.set(id, { since: prev?.since ?? Date.now(), stage });
        if (!this.#tty) this.#line(`${id}: ${stage}`);
        else this.#draw();
      },
      done: (key, r) => {
        this.#live.delete(label(key));
        this.#done++;
        this.#line(
          `${label(key)}: ${r.status} reward=${r.reward ?? "-"}${r.recorded ? "" : " NOT RECORDED"} calls=${r.calls} ${r.seconds.toFixed(1)} s [${this.#done}/${this.total}]${r.error ? ` (${r.stage}: ${firstLine(r.error)})` : ""}`,
        );
      },
    };
  }

  close(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#erase();
  }

  #line(text: string): void {
    this.#erase();
    this.#out.write(`${text}\n`);
    if (this.#tty) this.#draw();
  }

  #erase(): void {
    if (!this.#tty || this.#drawn === 0) return;
    this.#out.write(`\x1b[${this.#drawn}A\x1b[J`);
    this.#drawn = 0;
  }

  #draw(): void {
    if (!this.#tty) return;
    this.#erase();
    const lines = [...this.#live].map(
      ([id, s]) => `  ${id.padEnd(28)} ${s.stage.padEnd(8)} ${((Date.now() - s.since) / 1000).toFixed(0)} s`,
    );
    if (lines.length) this.#out.write(`${lines.join("\n")}\n`);
    this.#drawn = lines.length;
  }
}

/** fix-add#0 for a backbone (or a rollout without branches), fix-add#0.2 for its branch 2 (as the branch summary). */
export function label(key: RolloutKey): string {
  if (key.branch === undefined) return `${key.task}#${key.sample}`;
  return `${key.task}#${key.sample}.${key.branch ?? "?"}`;
}

function resultLabel(r: RolloutResult): string {
  return label({ task: r.task, sample: r.sample, ...(r.branch ? { branch: r.branch.index } : {}) });
}

function firstLine(s: string): string {
  const line = s.split("\n")[0] ?? "";
  return line.length > 120 ? `${line.slice(0, 120)}…` : line;
}

/**
 * The summary table: task, rollout, harness, status, reward, calls, trajectories, seconds; and, when the gateway does
 * not hold some rollout's result (its finish failed), a `recorded` column and a last line saying so.
 */
export function summaryTable(results: RolloutResult[]): string {
  const unrecorded = results.filter((r) => !r.recorded);
  const withRecorded = unrecorded.length > 0;
  const head = ["task", "rollout", "harness", "status", "reward", ...(withRecorded ? ["recorded"] : [])];
  head.push("calls", "trajectories", "seconds");
  const rows = results.map((r) => [
    resultLabel(r),
    r.rolloutId ?? "-",
    r.harness,
    r.status,
    r.reward === null ? "-" : String(r.reward),
    ...(withRecorded ? [r.recorded ? "yes" : "NO"] : []),
    String(r.calls),
    r.trajectories === null ? "-" : String(r.trajectories),
    r.seconds.toFixed(1),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const fmt = (row: string[]) =>
    row
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  const rewards = results.filter((r) => r.reward !== null).map((r) => r.reward!);
  const mean = rewards.length ? (rewards.reduce((a, b) => a + b, 0) / rewards.length).toFixed(3) : "-";
  const counts = new Map<string, number>();
  for (const r of results) counts.set(r.status, (counts.get(r.status) ?? 0) + 1);
  const footer = `${results.length} rollouts: ${[...counts].map(([s, c]) => `${c} ${s}`).join(", ")}; mean reward ${mean}`;
  const warning = withRecorded
    ? `${unrecorded.length} NOT RECORDED: the gateway does not hold the result above (${unrecorded.map(resultLabel).join(", ")}; see their error in --json)`
    : null;
  return [fmt(head), ...rows.map(fmt), footer, ...(warning ? [warning] : [])].join("\n");
}
