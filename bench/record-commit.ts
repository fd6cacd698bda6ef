// The record's share of a streamed call, in process: the stream relayed (as bench/stream-relay.ts), then the call's
// record built and group-committed to LMDB (prompt reference, encoding, transaction) — once with the record as it is
// stored now (the events the harness received, folded when read) and once as it was stored before (the whole
// response assembled, stripped and encoded as JSON on every call). Alternating runs; CPU time of this process.
//
//   tsx bench/record-commit.ts FILE.sse      (a stream with token ids and logprobs, e.g. the sim's answer)
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NativeStreamEvents } from "../gateway/relay/native-events.ts";
import { SseParser } from "../gateway/sse-parser.ts";
import { vllmFlavor } from "../gateway/upstream/vllm.ts";
import { RawJson, StreamedJson, type CallRecord } from "../store/records.ts";
import { Store } from "../store/store.ts";
import { compactStream } from "../store/stream-response.ts";
import { PromptIndex } from "../trajectory/prompt-index.ts";

const NOTHING_ASKED = { promptTokenIds: false, tokenIds: false, logprobs: false };
const REQUEST = new RawJson('{"model":"Qwen/Qwen3-8B","messages":[{"role":"user","content":"hi"}],"stream":true}');

export interface RecordFigures {
  /** CPU µs per call: relay + record + commit, with the stream kept and with the response assembled. */
  kept: number;
  assembled: number;
  /** Stored bytes of the response, each way. */
  keptBytes: number;
  assembledBytes: number;
}

async function run(store: Store, rolloutId: string, stream: Buffer, calls: number, keep: boolean): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    const events = new NativeStreamEvents(vllmFlavor.chat, NOTHING_ASKED, () => {});
    events.relay(new SseParser().push(stream));
    const { assembler } = events;
    let response: unknown;
    if (keep) response = new StreamedJson(events.written, "chat.completion");
    else {
      const whole = assembler.assembled();
      vllmFlavor.chat.stripWhole(whole, NOTHING_ASKED);
      response = whole;
    }
    const record: CallRecord = {
      seq: store.nextCallSeq(),
      rolloutId,
      api: "chat.completions",
      path: "/v1/chat/completions",
      stream: true,
      model: "Qwen/Qwen3-8B",
      status: "ok",
      httpStatus: 200,
      error: null,
      requestReceived: REQUEST,
      requestForwarded: REQUEST,
      response,
      promptTokenIds: assembler.promptTokenIds,
      choices: assembler.captures(),
      tokenSource: "upstream",
      tokenIssue: null,
      policyVersion: null,
      sampling: null,
      timings: { start: 0, upstreamStart: 0, firstByte: 0, firstToken: 0, end: 0, overheadMs: 0 },
      tools: 0,
    };
    await store.putCall(record);
  }
  const used = process.cpuUsage(before);
  return (used.user + used.system) / calls;
}

/** The bytes a stream's events are stored in (their shared head kept once). */
function storedBytes(sse: Buffer): number {
  const compact = compactStream(sse);
  return compact ? compact.sse.length + compact.head.length : sse.length;
}

export async function benchRecordCommit(stream: Buffer, calls: number, runs = 5): Promise<RecordFigures> {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-record-"));
  const store = new Store({ path: dir, promptIndex: new PromptIndex() });
  try {
    const kept: number[] = [];
    const assembled: number[] = [];
    for (let r = 0; r < runs; r++) {
      // A rollout per run, as a harness's calls repeat one prompt: each is stored as a reference after the first.
      for (const keep of r % 2 === 0 ? [true, false] : [false, true]) {
        const rolloutId = `bench-${r}-${keep}`;
        await store.putRollout({
          id: rolloutId,
          key: `rlk_${rolloutId}`,
          group: null,
          task: null,
          harness: null,
          metadata: {},
          status: "open",
          reward: null,
          createdAt: Date.now(),
          finishedAt: null,
        });
        (keep ? kept : assembled).push(await run(store, rolloutId, stream, calls, keep));
      }
    }
    const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
    const events = new NativeStreamEvents(vllmFlavor.chat, NOTHING_ASKED, () => {});
    events.relay(new SseParser().push(stream));
    const whole = events.assembler.assembled();
    vllmFlavor.chat.stripWhole(whole, NOTHING_ASKED);
    return {
      kept: median(kept),
      assembled: median(assembled),
      keptBytes: storedBytes(Buffer.concat(events.written)),
      assembledBytes: Buffer.byteLength(JSON.stringify(whole)),
    };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function printRecordCommitRow(f: RecordFigures): void {
  console.log("RECORD AND COMMIT (in process: one streamed call relayed, recorded and committed)");
  console.log(
    `  stream kept ${f.kept.toFixed(1)} µs CPU per call (response stored as ${f.keptBytes} B of events), ` +
      `response assembled ${f.assembled.toFixed(1)} µs (stored as ${f.assembledBytes} B of JSON)`,
  );
  console.log("(bench/record-commit.ts; medians of alternating runs)\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2];
  if (!file) throw new Error("usage: tsx bench/record-commit.ts <file.sse>");
  printRecordCommitRow(await benchRecordCommit(readFileSync(file), 3000));
}
