// The relay work of one streamed call, in process: the upstream's stream (a recorded sim answer with token ids and
// logprobs) split into events, each parsed for capture and given to the harness without the fields it did not ask
// for, and the whole response the call's record keeps (assembled from the chunks, stripped as the harness got it). CPU time is this process's own, so
// the figure holds on a busy machine where the cross-process cells of bench:gateway are noisy.
//
// The whole-response row is the same for a non-streamed call: the body decoded, parsed for capture, captured and given
// to the harness without the fields it did not ask for.
//
//   tsx bench/stream-relay.ts FILE.sse [WHOLE.json]   (bench:gateway runs it on answers fetched from its sim)
import { readFileSync } from "node:fs";
import { NativeStreamEvents } from "../gateway/relay/native-events.ts";
import { SseParser } from "../gateway/sse-parser.ts";
import type { Json } from "../gateway/upstream/fields.ts";
import { vllmFlavor } from "../gateway/upstream/vllm.ts";

export interface StreamRelayFigures {
  events: number;
  bytes: number;
  /** CPU µs per call: the whole relay work, and splitting alone (what any SSE-aware forwarder pays). */
  relayUs: number;
  splitUs: number;
}

const NOTHING_ASKED = { promptTokenIds: false, tokenIds: false, logprobs: false };

function cpuMicros(calls: number, run: () => void): number {
  for (let i = 0; i < Math.min(calls, 2000); i++) run();
  const before = process.cpuUsage();
  for (let i = 0; i < calls; i++) run();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / calls;
}

/** `stream` relayed as one upstream read, the way a fast upstream's answer arrives. */
export function benchStreamRelay(stream: Buffer, calls: number): StreamRelayFigures {
  let sink = 0;
  const relayUs = cpuMicros(calls, () => {
    const events = new NativeStreamEvents(vllmFlavor.chat, NOTHING_ASKED, () => {});
    const out = events.relay(new SseParser().push(stream));
    // What the record keeps: the whole response, as the harness received it.
    const response = events.assembler.assembled();
    vllmFlavor.chat.stripWhole(response, NOTHING_ASKED);
    sink += (out?.length ?? 0) + events.assembler.captures().length + Object.keys(response).length;
  });
  const splitUs = cpuMicros(calls, () => {
    sink += new SseParser().push(stream).length;
  });
  if (sink < 0) throw new Error("unreachable");
  return { events: new SseParser().push(stream).length, bytes: stream.length, relayUs, splitUs };
}

/**
 * A non-streamed response's relay work: what `relayWhole` does before the commit. The logprob entries are read by the
 * codec's scan and the rest parsed (`parseWhole`); the unwanted fields are nulled on the parsed body and serialized
 * again: splicing them in the text (as streamed chunks are) measured slower here (~42 against ~33 µs), as the logprobs
 * are most of the body and the splice walks them where JSON.stringify skips them. `parsedUs` is the same work with the
 * whole body given to JSON.parse, the baseline of the scan.
 */
export function benchWholeRelay(body: Buffer, calls: number): { relayUs: number; parsedUs: number } {
  let sink = 0;
  const run = (scan: boolean) =>
    cpuMicros(calls, () => {
      const text = body.toString("utf8");
      const parsed = (scan ? vllmFlavor.chat.parseWhole!(text, NOTHING_ASKED) : null) ?? (JSON.parse(text) as Json);
      sink += vllmFlavor.chat.captureWhole(parsed).choices.length;
      vllmFlavor.chat.stripWhole(parsed, NOTHING_ASKED);
      sink += Buffer.from(JSON.stringify(parsed)).length;
    });
  // Alternated, so that a machine whose load drifts weighs on both alike.
  const relay: number[] = [];
  const parsed: number[] = [];
  for (let round = 0; round < 3; round++) {
    relay.push(run(true));
    parsed.push(run(false));
  }
  if (sink < 0) throw new Error("unreachable");
  return { relayUs: median(relay), parsedUs: median(parsed) };
}

function median(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
}

export function printWholeRelayRow(bytes: number, f: { relayUs: number; parsedUs: number }): void {
  console.log(`WHOLE RELAY (in process: one non-streamed response, ${(bytes / 1000).toFixed(1)} kB)`);
  console.log(
    `  relay work ${f.relayUs.toFixed(1)} µs CPU per call; ${f.parsedUs.toFixed(1)} with the whole body given to JSON.parse (${(f.relayUs / f.parsedUs).toFixed(2)}×)`,
  );
  console.log(
    "relay work: body decoded, parsed (logprob entries scanned) and captured, given to the harness without the token",
  );
  console.log("fields it did not ask for (bench/stream-relay.ts).\n");
}

export function printStreamRelayRow(f: StreamRelayFigures): void {
  console.log(`STREAM RELAY (in process: one streamed call's ${f.events} events, ${(f.bytes / 1000).toFixed(1)} kB)`);
  console.log(
    `  relay work ${f.relayUs.toFixed(1)} µs CPU per call (of which splitting into events ${f.splitUs.toFixed(1)})`,
  );
  console.log(
    "relay work: events split, each parsed once for capture and given to the harness without the token fields it did",
  );
  console.log("not ask for, and the bytes the record keeps joined (bench/stream-relay.ts).\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2];
  if (!file) throw new Error("usage: tsx bench/stream-relay.ts <file.sse> [whole.json]");
  printStreamRelayRow(benchStreamRelay(readFileSync(file), 10_000));
  const whole = process.argv[3];
  if (whole) printWholeRelayRow(readFileSync(whole).length, benchWholeRelay(readFileSync(whole), 10_000));
}
