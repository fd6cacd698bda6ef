// The shell blocks of a Markdown page, in order, with what the walk does with each. A block runs as written unless
// the line before it says otherwise, in an HTML comment GitHub does not show:
//   <!-- walk: skip (why) -->   not run: it needs a GPU, a real inference server, or is the test suite itself
//   <!-- walk: serve PORT… -->  long-running servers: started in the background, the walk goes on once each PORT
//                               answers (a later serve block on one of its ports stops it first)
//   <!-- walk: background -->   a long-running client (a trainer in its own terminal): started, and the walk goes on
// A skip without its reason is refused, so a page never loses a block to the walk silently.

export type WalkMode = { kind: "run" } | { kind: "skip"; why: string } | { kind: "serve"; ports: number[] };

export interface ShellBlock {
  /** The page it is on, as given. */
  file: string;
  /** 1-based line of its opening fence. */
  line: number;
  /** The block's text, verbatim (without the fences). */
  text: string;
  mode: WalkMode;
}

const SHELL_LANGUAGES = new Set(["sh", "bash", "shell"]);
const MARK = /^<!--\s*walk:\s*(.*?)\s*-->$/;

function modeOf(mark: string, where: string): WalkMode {
  const skip = /^skip\s*\((.+)\)$/.exec(mark);
  if (skip) return { kind: "skip", why: skip[1]! };
  const serve = /^serve((?:\s+\d+)+)$/.exec(mark);
  if (serve) return { kind: "serve", ports: serve[1]!.trim().split(/\s+/).map(Number) };
  if (mark === "background") return { kind: "serve", ports: [] };
  throw new Error(`${where}: walk mark '${mark}' is none of 'skip (why)', 'serve PORT…', 'background'`);
}

/** Every fenced shell block of `markdown` (named `file` in messages), with its walk mode. */
export function shellBlocks(file: string, markdown: string): ShellBlock[] {
  const lines = markdown.split("\n");
  const blocks: ShellBlock[] = [];
  let previous = "";
  for (let i = 0; i < lines.length; i++) {
    const fence = /^(```+|~~~+)\s*(\S*)/.exec(lines[i]!);
    if (!fence) {
      if (lines[i]!.trim() !== "") previous = lines[i]!.trim();
      continue;
    }
    const close = fence[1]!;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i]!.startsWith(close); i++) body.push(lines[i]!);
    const mark = MARK.exec(previous);
    previous = "";
    if (!SHELL_LANGUAGES.has(fence[2]!)) {
      if (mark) throw new Error(`${file}:${start + 1}: a walk mark before a ${fence[2] || "plain"} block`);
      continue;
    }
    const mode = mark ? modeOf(mark[1]!, `${file}:${start + 1}`) : { kind: "run" as const };
    blocks.push({ file, line: start + 1, text: body.join("\n"), mode });
  }
  return blocks;
}
