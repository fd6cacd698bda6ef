// The record's share of a streamed call, in process: the stream relayed (as bench/stream-relay.ts), then the call's
// record built by its CallRecorder (the whole response assembled and stripped as the harness got it, the ids judged,
// the metrics counted) and group-committed to LMDB (prompt reference, encoding, transaction). CPU time of this process, medians of several runs.
//
//   tsx bench/record-commit.ts FILE.sse      (a stream with token ids and logprobs, e.g. the sim's answer)
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NativeStreamEvents } from "../gateway/relay/native-events.ts";
import { SseParser } from "../gateway/sse-parser.ts";
import { vllmFlavor } from "../gateway/upstream/vllm.ts";
import { CallRecorder, type CallOutcome } from "../gateway/capture/call-recorder.ts";
import { GatewayMetrics } from "../gateway/metrics.ts";
import { RawJson } from "../store/records.ts";
import { Store } from "../store/store.ts";
import { testRolloutRecord } from "../store/test-support.ts";
import { PromptIndex } from "../trajectory/prompt-index.ts";

const NOTHING_ASKED = { promptTokenIds: false, tokenIds: false, logprobs: false };
const REQUEST = new RawJson('{"model":"Qwen/Qwen3-8B","messages":[{"role":"user","content":"hi"}],"stream":true}');

export interface RecordFigures {
  /** CPU µs per call: relay + record + commit. */
  cpuUs: number;
  /** Stored bytes of the response. */
  responseBytes: number;
}

async function run(store: Store, metrics: GatewayMetrics, rolloutId: string, stream: Buffer, calls: number) {
  const before = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    // The call's record as the gateway keeps it: started, timed, finished (judged, counted in the metrics, committed).
    const recorder = new CallRecorder(store, metrics, {
      rolloutId,
      api: "chat.completions",
      path: "/v1/chat/completions",
      stream: true,
      model: "Qwen/Qwen3-8B",
      requestReceived: REQUEST,
      requestForwarded: REQUEST,
      tools: 0,
      policyVersion: null,
      sampling: null,
      startEpoch: Date.now(),
      startPerf: performance.now(),
      limits: { vocabSize: 151_936, choices: 1 },
    });
    recorder.markUpstreamStart();
    recorder.markFirstByte();
    const events = new NativeStreamEvents(vllmFlavor.chat, NOTHING_ASKED, () => recorder.markFirstToken());
    events.relay(new SseParser().push(stream));
    const { assembler } = events;
    const response = assembler.assembled();
    vllmFlavor.chat.stripWhole(response, NOTHING_ASKED);
    recorder.endWork();
    await recorder.finish({
      status: "ok",
      httpStatus: 200,
      response,
      promptTokenIds: assembler.promptTokenIds,
      choices: assembler.captures(),
      usage: response["usage"] as CallOutcome["usage"],
    });
    if (recorder.status !== "ok") throw new Error("the bench's call was not recorded as ok");
  }
  const used = process.cpuUsage(before);
  return (used.user + used.system) / calls;
}

export async function benchRecordCommit(stream: Buffer, calls: number, runs = 5): Promise<RecordFigures> {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-record-"));
  const store = new Store({ path: dir, promptIndex: new PromptIndex() });
  const metrics = new GatewayMetrics();
  try {
    const cpu: number[] = [];
    for (let r = 0; r < runs; r++) {
      // A rollout per run, as a harness's calls repeat one prompt: each is stored as a reference after the first.
      const rolloutId = `bench-${r}`;
      await store.putRollout(testRolloutRecord({ id: rolloutId, createdAt: Date.now() }));
      cpu.push(await run(store, metrics, rolloutId, stream, calls));
    }
    const events = new NativeStreamEvents(vllmFlavor.chat, NOTHING_ASKED, () => {});
    events.relay(new SseParser().push(stream));
    const whole = events.assembler.assembled();
    vllmFlavor.chat.stripWhole(whole, NOTHING_ASKED);
    return {
      cpuUs: [...cpu].sort((a, b) => a - b)[Math.floor(cpu.length / 2)]!,
      responseBytes: Buffer.byteLength(JSON.stringify(whole)),
    };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function printRecordCommitRow(f: RecordFigures): void {
  console.log("RECORD AND COMMIT (in process: one streamed call relayed, recorded and committed)");
  console.log(`  ${f.cpuUs.toFixed(1)} µs CPU per call (response stored as ${f.responseBytes} B of JSON)`);
  console.log("(bench/record-commit.ts; median of runs)\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2];
  if (!file) throw new Error("usage: tsx bench/record-commit.ts <file.sse>");
  printRecordCommitRow(await benchRecordCommit(readFileSync(file), 3000));
}
