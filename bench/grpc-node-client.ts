// bench/grpc.ts's Node side, in its own process as a trainer would be: read N batches with the TypeScript
// TrainerClient, ack each without waiting, print the bytes, seconds and CPU seconds (from the first batch on) and
// how many arrays had to be copied to be aligned (0: every array is a view of the received message).
import { TrainerClient } from "../clients/ts/index.ts";

const [address, countText, inFlightText] = process.argv.slice(2);
const count = Number(countText);
const client = new TrainerClient(address!);
const ac = new AbortController();
let n = 0;
let start = 0;
let cpu = process.cpuUsage();
let bytes = 0;
let checksum = 0;
let copied = 0; // arrays that were copied to align them (a view shares the whole received message's memory)
const acks: Array<Promise<number>> = [];
for await (const b of client.batches({ signal: ac.signal, maxInFlight: Number(inFlightText), trainer: "bench" })) {
  if (n === 0) {
    start = performance.now(); // the first batch pays for connecting
    cpu = process.cpuUsage();
  } else {
    for (const a of [b.offsets, b.tokenIds, b.lossMask, b.logprobs, b.advantages, b.lossWeights]) {
      bytes += a.byteLength;
      if (a.buffer.byteLength === a.byteLength) copied++;
    }
  }
  checksum += b.tokenIds[b.tokenIds.length - 1]! + b.lossMask[0]!;
  acks.push(client.ack([b.batchId]));
  if (++n >= count) ac.abort();
}
const seconds = (performance.now() - start) / 1000;
const used = process.cpuUsage(cpu);
const cpuSeconds = (used.user + used.system) / 1e6;
await Promise.all(acks);
client.close();
console.log(JSON.stringify({ bytes, seconds, cpuSeconds, batches: n - 1, checksum, copied }));
