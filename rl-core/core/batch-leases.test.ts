// Batches leased to trainer streams (batch-leases.ts), over gRPC with the TypeScript client: a batch one stream holds
// is not given to another; when that stream ends unacked, its batch goes to the next stream that has room; an acked
// batch is gone.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Server } from "@grpc/grpc-js";
import { TrainerClient } from "../../clients/ts/index.ts";
import { bindServer, serverOptions, shutdownServer, trainerService, type CoreStatus } from "../../protocol/index.ts";
import { buildBatch } from "./batch-packer.ts";
import type { StoredBatch } from "./core-store.ts";
import { groupAdvantages } from "./group-advantages.ts";
import { memoryBatchSource, pending } from "./test-support.ts";
import { TrainerService } from "./trainer-service.ts";

async function storedBatch(id: number): Promise<StoredBatch> {
  const rows = (
    await groupAdvantages(
      [
        pending(`r${id}a`, 1, [{ ids: [1, 2, 3], mask: [0, 1, 1] }]),
        pending(`r${id}b`, 0, [{ ids: [1, 4], mask: [0, 1] }]),
      ],
      { estimator: "grpo" },
    )
  ).rows;
  return buildBatch(id, rows, { normalize: "none", lossAgg: "token-mean", estimator: "grpo" });
}

test(
  "a batch is held by one stream until acked, and goes to another when its stream ends unacked",
  { timeout: 30_000 },
  async () => {
    const batches = new Map<number, StoredBatch>();
    for (const id of [1, 2]) batches.set(id, await storedBatch(id));
    const source = memoryBatchSource(batches);
    const service = new TrainerService({ source, token: null, status: () => ({}) as CoreStatus });
    const server = new Server(serverOptions());
    server.addService(trainerService, service.handlers());
    const port = await bindServer(server, "127.0.0.1", 0);
    const client = new TrainerClient(`127.0.0.1:${port}`, { deadlineMs: 10_000 });
    try {
      const first = new AbortController();
      const a = client.batches({ maxInFlight: 1, signal: first.signal });
      assert.equal((await a.next()).value?.batchId, 1);
      assert.equal(service.leased, 1);
      const b = client.batches({ maxInFlight: 5 });
      assert.equal((await b.next()).value?.batchId, 2, "batch 1 is held by the first stream");
      first.abort();
      await a.return(undefined);
      assert.equal((await b.next()).value?.batchId, 1, "the first stream ended unacked: its batch goes to the other");
      assert.equal(await client.ack([1, 2]), 2);
      assert.equal(batches.size, 0);
      await b.return(undefined);
    } finally {
      client.close();
      await shutdownServer(server, 1000);
    }
  },
);
