// JSONL export: one JSON object per trajectory and line, to a file or standard output.
import { createWriteStream, type WriteStream } from "node:fs";
import { once } from "node:events";
import type { ExportRow, ExportSink } from "./export.ts";

export class JsonlSink implements ExportSink {
  readonly #out: NodeJS.WritableStream;
  readonly #file: WriteStream | null;
  #bytes = 0;
  private constructor(out: NodeJS.WritableStream, file: WriteStream | null) {
    this.#out = out;
    this.#file = file;
  }

  /** To `path`, or to standard output when none is given. */
  static async open(path: string | null): Promise<JsonlSink> {
    if (path === null) return new JsonlSink(process.stdout, null);
    const file = createWriteStream(path);
    await once(file, "open");
    return new JsonlSink(file, file);
  }

  async write(rows: readonly ExportRow[]): Promise<void> {
    let text = "";
    for (const r of rows) text += `${JSON.stringify(r)}\n`;
    this.#bytes += Buffer.byteLength(text);
    if (!this.#out.write(text)) await once(this.#out, "drain");
  }

  async finish(): Promise<{ bytes: number }> {
    if (this.#file) {
      this.#file.end();
      await once(this.#file, "finish");
    }
    return { bytes: this.#bytes };
  }

  async abort(): Promise<void> {
    this.#file?.destroy();
  }
}
