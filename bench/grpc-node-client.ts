// bench/grpc.ts's Node side, in its own process as a trainer would be: read N batches with the TypeScript
// TrainerClient, ack each without waiting, print the bytes and seconds (timed from the first batch on).
import { TrainerClient } from "../clients/ts/index.ts";

const [address, countText, inFlightText] = process.argv.slice(2);
const count = Number(countText);
const client = new TrainerClient(address!);
const ac = new AbortController();
let n = 0;
let start = 0;
let bytes = 0;
let checksum = 0;
const acks: Array<Promise<number>> = [];
for await (const b of client.batches({ signal: ac.signal, maxInFlight: Number(inFlightText), trainer: "bench" })) {
  if (n === 0) start = performance.now(); // the first batch pays for connecting
  else for (const a of [b.offsets, b.tokenIds, b.lossMask, b.logprobs, b.advantages, b.lossWeights]) bytes += a.byteLength;
  checksum += b.tokenIds[b.tokenIds.length - 1]! + b.lossMask[0]!;
  acks.push(client.ack([b.batchId]));
  if (++n >= count) ac.abort();
}
const seconds = (performance.now() - start) / 1000;
await Promise.all(acks);
client.close();
console.log(JSON.stringify({ bytes, seconds, batches: n - 1, checksum }));
