// A progress bar on stderr for long work (cli-progress), drawn only on a terminal so that piped and captured output
// (scripts, tests, --json) stays clean.
import cliProgress from "cli-progress";

export interface Progress {
  tick(): void;
  stop(): void;
}

export function progressBar(label: string, total: number, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY || total === 0) return { tick() {}, stop() {} };
  const bar = new cliProgress.SingleBar(
    {
      stream,
      format: `${label} [{bar}] {value}/{total} {percentage}% · eta {eta_formatted}`,
      hideCursor: true,
      clearOnComplete: true,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0);
  return { tick: () => bar.increment(), stop: () => bar.stop() };
}
