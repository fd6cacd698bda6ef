// Incremental Server-Sent Events splitter. Feeds arbitrary byte chunks, emits complete events (the raw bytes of the
// event including its terminating blank line, and its joined `data:` payload). Only what capture needs is parsed.

export interface SseEvent {
  /** Raw bytes of the event as received, terminator included: forwarded unchanged when nothing must be rewritten. */
  raw: Buffer;
  /** The `data:` lines joined with "\n"; null for events without data (comments, keep-alives). */
  data: string | null;
}

const LF = 0x0a;
const CR = 0x0d;

export class SseParser {
  #pending: Buffer = Buffer.alloc(0);

  /** Returns the events completed by this chunk. */
  push(chunk: Buffer): SseEvent[] {
    const buffer = this.#pending.length ? Buffer.concat([this.#pending, chunk]) : chunk;
    const events: SseEvent[] = [];
    let start = 0;
    let i = 0;
    while (i < buffer.length) {
      const end = eventEnd(buffer, i);
      if (end < 0) break;
      const raw = buffer.subarray(start, end);
      events.push({ raw, data: dataOf(raw) });
      start = end;
      i = end;
    }
    this.#pending = start < buffer.length ? Buffer.from(buffer.subarray(start)) : Buffer.alloc(0);
    return events;
  }

  /** Bytes of an event the stream ended in the middle of. */
  rest(): Buffer {
    return this.#pending;
  }
}

/** Index just past the blank line ending the event that starts at or after `from`; -1 if not complete yet. */
function eventEnd(buffer: Buffer, from: number): number {
  for (let i = buffer.indexOf(LF, from); i >= 0; i = buffer.indexOf(LF, i + 1)) {
    // "\n\n" or "\n\r\n"
    if (buffer[i + 1] === LF) return i + 2;
    if (buffer[i + 1] === CR && buffer[i + 2] === LF) return i + 3;
  }
  return -1;
}

/** True when the event starts with `data: ` (compared byte by byte: no view allocated per event). */
function startsWithDataSpace(raw: Buffer): boolean {
  return raw[0] === 0x64 && raw[1] === 0x61 && raw[2] === 0x74 && raw[3] === 0x61 && raw[4] === 0x3a && raw[5] === 0x20;
}

function dataOf(raw: Buffer): string | null {
  // Fast path for what inference servers send: one `data: ` line per event, ended by "\n\n".
  const firstLf = raw.indexOf(LF);
  if (firstLf === raw.length - 2 && raw[firstLf - 1] !== CR && startsWithDataSpace(raw)) {
    return raw.toString("utf8", 6, firstLf);
  }
  const text = raw.toString("utf8");
  let data: string | null = null;
  for (const line of text.split(/\r?\n/)) {
    if (!line.startsWith("data:")) continue;
    const value = line.charCodeAt(5) === 0x20 ? line.slice(6) : line.slice(5);
    data = data === null ? value : `${data}\n${value}`;
  }
  return data;
}
