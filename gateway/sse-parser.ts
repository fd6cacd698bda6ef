// Incremental Server-Sent Events splitter. Feeds arbitrary byte chunks, emits complete events (the raw bytes of the
// event including its terminating blank line, and its joined `data:` payload). Only what capture needs is parsed.

export interface SseEvent {
  /** Raw bytes of the event as received, terminator included: forwarded unchanged when nothing must be rewritten. */
  readonly raw: Buffer;
  /** The `data:` lines joined with "\n"; null for events without data (comments, keep-alives). */
  readonly data: string | null;
}

const LF = 0x0a;
const CR = 0x0d;

const EMPTY = Buffer.alloc(0);

/** An event of a received chunk: its bytes are viewed only when asked for (most events are relayed as rewritten text). */
class ChunkEvent implements SseEvent {
  readonly data: string | null;
  readonly #chunk: Buffer;
  readonly #start: number;
  readonly #end: number;

  constructor(chunk: Buffer, start: number, end: number, data: string | null) {
    this.#chunk = chunk;
    this.#start = start;
    this.#end = end;
    this.data = data;
  }

  get raw(): Buffer {
    return this.#chunk.subarray(this.#start, this.#end);
  }
}

export class SseParser {
  #pending: Buffer = EMPTY;

  /** Returns the events completed by this chunk. */
  push(chunk: Buffer): SseEvent[] {
    const buffer = this.#pending.length ? Buffer.concat([this.#pending, chunk]) : chunk;
    const events: SseEvent[] = [];
    let start = 0;
    while (start < buffer.length) {
      const firstLf = buffer.indexOf(LF, start);
      if (firstLf < 0) break;
      // What inference servers send: one `data: ` line per event, ended by "\n\n" (read without a second search).
      if (buffer[firstLf + 1] === LF && buffer[firstLf - 1] !== CR && startsWithDataSpace(buffer, start)) {
        const end = firstLf + 2;
        events.push(new ChunkEvent(buffer, start, end, buffer.toString("utf8", start + 6, firstLf)));
        start = end;
        continue;
      }
      const end = eventEnd(buffer, firstLf);
      if (end < 0) break;
      const raw = buffer.subarray(start, end);
      events.push({ raw, data: dataOf(raw) });
      start = end;
    }
    this.#pending = start < buffer.length ? Buffer.from(buffer.subarray(start)) : EMPTY;
    return events;
  }

  /** Bytes of an event the stream ended in the middle of. */
  rest(): Buffer {
    return this.#pending;
  }
}

/** Index just past the blank line ending the event whose first line ends at `firstLf`; -1 if not complete yet. */
function eventEnd(buffer: Buffer, firstLf: number): number {
  for (let i = firstLf; i >= 0; i = buffer.indexOf(LF, i + 1)) {
    // "\n\n" or "\n\r\n"
    if (buffer[i + 1] === LF) return i + 2;
    if (buffer[i + 1] === CR && buffer[i + 2] === LF) return i + 3;
  }
  return -1;
}

/** True when the event starts with `data: ` (compared byte by byte: no view allocated per event). */
function startsWithDataSpace(bytes: Buffer, at: number): boolean {
  return (
    bytes[at] === 0x64 &&
    bytes[at + 1] === 0x61 &&
    bytes[at + 2] === 0x74 &&
    bytes[at + 3] === 0x61 &&
    bytes[at + 4] === 0x3a &&
    bytes[at + 5] === 0x20
  );
}

function dataOf(raw: Buffer): string | null {
  const text = raw.toString("utf8");
  let data: string | null = null;
  for (const line of text.split(/\r?\n/)) {
    if (!line.startsWith("data:")) continue;
    const value = line.charCodeAt(5) === 0x20 ? line.slice(6) : line.slice(5);
    data = data === null ? value : `${data}\n${value}`;
  }
  return data;
}
