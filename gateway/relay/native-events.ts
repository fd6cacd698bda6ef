// The harness's side of a stream the upstream sends in the harness's own API: each event is read once for capture
// (the assembler) and given to the harness as the upstream wrote it, minus the fields rlgate asked for itself (the
// codec splices them out of the event's text). The final `[DONE]` is held back: it goes out after the commit.
import type { SseEvent } from "../sse-parser.ts";
import type { ApiCodec, HarnessWants, StreamAssembler } from "../upstream/flavor.ts";
import { wantsEverything } from "../upstream/flavor.ts";
import { parseJsonObject, streamErrorMessage } from "./exchange.ts";
import { WriteBatch } from "./write-batch.ts";
import type { RecentIdLists } from "../upstream/id-list.ts";

const DONE = "[DONE]";
/** `[DONE]` with room for whitespace around it: longer data is a chunk, and is not trimmed to be compared. */
const MAX_DONE_LENGTH = 32;

export class NativeStreamEvents {
  readonly assembler: StreamAssembler;
  /** The `[DONE]` event, held back until the call is committed. */
  held: Buffer | null = null;
  /** The first event that was not a JSON object (the call fails; the event is passed through). */
  malformed: string | null = null;
  /** The first error event (the call fails; the event is passed through for the harness to read). */
  upstreamError: string | null = null;
  readonly #codec: ApiCodec;
  readonly #wants: HarnessWants;
  readonly #stripNeeded: boolean;
  readonly #onToken: () => void;
  readonly #recent: RecentIdLists | null;
  readonly #out = new WriteBatch();

  /**
   * `onToken` hears each event that carried sampled tokens or text; `recent`: the rollout's recent prompt id lists
   * (a prompt that continues one is compared, not read).
   */
  constructor(codec: ApiCodec, wants: HarnessWants, onToken: () => void, recent: RecentIdLists | null = null) {
    this.#codec = codec;
    this.#recent = recent;
    this.#wants = wants;
    this.#stripNeeded = !wantsEverything(wants);
    this.#onToken = onToken;
    // Chunks the scan may read keep no top alternatives: entropies only where every chunk is parsed.
    this.assembler = codec.newAssembler({ entropies: wants.logprobs || wants.topEntries === true });
  }

  /** What the harness receives for `events`, in one piece; null for nothing. */
  relay(events: readonly SseEvent[]): Buffer | string | null {
    this.add(events);
    return this.take();
  }

  /** What the events added since the last take give the harness, in one piece; null for nothing. */
  take(): Buffer | string | null {
    return this.#out.take();
  }

  /**
   * The stream's last write, in one piece: the events not taken yet, `rest` (an event the stream was cut in) and the
   * held `[DONE]`; null for nothing.
   */
  takeLast(rest: Buffer): Buffer | string | null {
    if (rest.length) this.#out.add(rest);
    if (this.held !== null) this.#out.add(this.held);
    return this.#out.take();
  }

  /** Reads `events` for capture and adds what the harness receives of them to what the next `take` gives. */
  add(events: readonly SseEvent[]): void {
    const out = this.#out;
    for (const event of events) {
      const data = event.data;
      if (data === null) {
        out.add(event.raw);
        continue;
      }
      if (data.length <= MAX_DONE_LENGTH && data.trim() === DONE) {
        this.held = event.raw;
        continue;
      }
      const scanned = this.#codec.scanChunk?.(data, this.#wants, this.#recent) ?? null;
      const parsed = scanned !== null ? scanned.chunk : parseJsonObject(data, this.#recent);
      if (parsed === null) {
        this.malformed ??= `upstream sent an event that is not a JSON object: ${data.slice(0, 200)}`;
        out.add(event.raw);
        continue;
      }
      const errorMessage = streamErrorMessage(parsed);
      if (errorMessage !== null) {
        // Passed through as the upstream sent it: the harness speaks this API and reads the error itself.
        this.upstreamError ??= errorMessage;
        out.add(event.raw);
        continue;
      }
      if (this.assembler.add(parsed, scanned !== null)) this.#onToken();
      if (!this.#stripNeeded) {
        out.add(event.raw);
        continue;
      }
      const text = scanned !== null ? scanned.harnessText : this.#codec.harnessChunk(data, parsed, this.#wants);
      if (text !== null) out.add(`data: ${text}\n\n`);
    }
  }
}
