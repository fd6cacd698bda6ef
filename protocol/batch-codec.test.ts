// The aligned Batch encoder: what protobufjs decodes from it equals the message, every 4-byte array starts
// aligned in the gRPC frame, and batches served to two trainers at once arrive intact (its output buffer is
// reused from one message to the next).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Server } from "@grpc/grpc-js";
import { TrainerClient as Trainer } from "../clients/ts/index.ts";
import type { StoredBatch } from "../rl-core/core/core-store.ts";
import { batchMessage } from "../rl-core/core/served-batches.ts";
import { memoryBatchSource } from "../rl-core/core/test-support.ts";
import { TrainerService } from "../rl-core/core/trainer-service.ts";
import { treeBatch } from "../rl-core/core/tree-layout.ts";
import { bytesOf, type BatchMessage, type RowInfo } from "./index.ts";
import { TrainerClient, trainerService } from "./proto.ts";
import { bindServer, shutdownServer } from "./server.ts";

const encode = trainerService.StreamBatches!.responseSerialize as (m: BatchMessage) => Buffer;
const decode = TrainerClient.service.StreamBatches!.responseDeserialize as (b: Buffer) => BatchMessage;

function batch(id: number, rows: number, tokensPerRow: number, seed = id): StoredBatch {
  let s = seed;
  const next = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0);
  const tokens = rows * tokensPerRow;
  return {
    batchId: id,
    rows,
    offsets: bytesOf(Int32Array.from({ length: rows + 1 }, (_, r) => r * tokensPerRow)),
    tokenIds: bytesOf(Int32Array.from({ length: tokens }, () => next() % 151_000)),
    lossMask: bytesOf(Uint8Array.from({ length: tokens }, () => next() % 2)),
    logprobs: bytesOf(Float32Array.from({ length: tokens }, () => -(next() % 1000) / 100)),
    advantages: bytesOf(Float32Array.from({ length: tokens }, () => (next() % 200) / 100 - 1)),
    lossWeights: tokens ? bytesOf(Float32Array.from({ length: tokens }, () => 1 / tokens)) : Buffer.alloc(0),
    rowInfo: Array.from({ length: rows }, (_, r) => ({
      rolloutId: `r${id}-${r}`,
      trajectoryId: `r${id}-${r}:0`,
      groupKey: `group:g${r >> 1}`,
      group: `g${r >> 1}`,
      task: "t",
      harness: r % 2 ? "h1" : "h2",
      reward: r % 3,
      segment: "main",
      generation: 1,
      round: 3,
      late: false,
      calls: [
        {
          seq: 1000 + r,
          policyVersion: "v1",
          temperature: 0.7,
          finishReason: "stop",
          versionRuns:
            r === 0
              ? [
                  { start: 0, version: "v1" },
                  { start: 2, version: "v2" },
                ]
              : [],
        },
      ],
      finishReason: "stop",
      policyVersion: "v1",
      noSignal: false,
      staleness: r % 2,
      staleTokens: r % 2 ? 2 : 0,
      signal: "ok" as const,
      context: { rollouts: [`r${id}-${r}`], rewards: [r % 3], tokens: [tokensPerRow] },
    })),
    estimator: "grpo",
    normalize: "none",
    lossAgg: "token-mean",
    tokens,
    trainedTokens: 0,
    groups: Math.ceil(rows / 2),
    createdAtMs: 1234.5 + id,
    callIndex: bytesOf(Int32Array.from({ length: tokens }, () => (next() % 3) - 1)),
    batchUnit: "rollout",
    lossTokens: tokens,
    rollouts: rows,
    currentVersion: "v2",
    maxStaleness: rows > 1 ? 1 : 0,
    staleTokens: 2 * Math.floor(rows / 2),
    // MoE routing replay: uint16 [tokens, 2 layers, 3 experts a token], aligned like the others.
    routedExperts: bytesOf(Uint16Array.from({ length: tokens * 6 }, () => next() % 300)),
    routedExpertsDtype: tokens ? "uint16" : "",
    moeLayers: tokens ? 2 : 0,
    moeTopK: tokens ? 3 : 0,
  };
}

const ROW_ARRAYS = [
  "offsets",
  "tokenIds",
  "lossMask",
  "logprobs",
  "advantages",
  "lossWeights",
  "callIndex",
  "routedExperts",
] as const;
const ARRAYS = [...ROW_ARRAYS, "parents", "positions", "tokenRows", "rowNodes", "trieOffsets", "subtreeEnds"] as const;

describe("aligned batch encoder", () => {
  test("decodes (protobufjs) to the same message, every 4-byte array aligned in the frame", () => {
    // Row and token counts that put each field's header at every residue mod 4, and empty arrays.
    for (const [rows, perRow] of [
      [0, 0],
      [1, 1],
      [1, 3],
      [2, 5],
      [3, 7],
      [5, 33],
      [64, 2048],
      [7, 30_000],
    ] as const) {
      const rowsBatch = batch(rows * 1000 + perRow + 1, rows, perRow);
      // The tree layout too: its int32 structure arrays are aligned like the others.
      for (const m of [rowsBatch, { ...treeBatch(batchMessage(rowsBatch)), rowInfo: rowsBatch.rowInfo }]) {
        const bytes = encode(m);
        // As a grpc-js receiver holds it: the 5-byte prefix, then the message, in fresh memory.
        const frame = Buffer.alloc(bytes.length + 5);
        bytes.copy(frame, 5);
        const got = decode(frame.subarray(5));
        for (const name of ARRAYS) {
          assert.deepEqual(Buffer.from(got[name] ?? []), Buffer.from(m[name] ?? []), `${name} (${rows}×${perRow})`);
          if (name !== "lossMask" && got[name]!.byteLength > 0)
            assert.equal(got[name]!.byteOffset % 4, 0, `${name} aligned`);
        }
        const { padding, ...rest } = got;
        assert.ok(!padding || padding.every((b) => b === 0));
        // The core's own bookkeeping (signal, group context) stays in its store (the group key travels: group_key); optional call fields
        // arrive with protobufjs's one-field-oneof markers (`temperaturePresent`).
        const calls = (row: RowInfo) =>
          row.calls.map((c) => Object.fromEntries(Object.entries(c).filter(([k]) => !k.endsWith("Present"))));
        assert.deepEqual(
          {
            ...rest,
            ...Object.fromEntries(ARRAYS.map((n) => [n, null])),
            rowInfo: rest.rowInfo.map((r) => ({ ...r, calls: calls(r) })),
          },
          {
            ...m,
            layout: m.layout ?? "",
            rowTokens: m.rowTokens ?? 0,
            ...Object.fromEntries(ARRAYS.map((n) => [n, null])),
            rowInfo: m.rowInfo.map(({ signal: _s, context: _c, ...r }) => r),
          },
        );
      }
    }
  });

  test("two trainers streaming at once get intact batches (the encoder's buffer is reused)", async () => {
    const batches = new Map(Array.from({ length: 12 }, (_, i) => [i + 1, batch(i + 1, 8, 4096 + i * 3)]));
    const source = memoryBatchSource(batches);
    const expected = new Map([...batches].map(([id, b]) => [id, Buffer.concat(ROW_ARRAYS.map((n) => b[n]!))]));
    const service = new TrainerService({ source, token: null, status: () => ({}) as never });
    const server = new Server();
    server.addService(trainerService, service.handlers());
    const port = await bindServer(server, "127.0.0.1", 0);
    const clients = [new Trainer(`127.0.0.1:${port}`), new Trainer(`127.0.0.1:${port}`)];
    const seen: number[] = [];
    const ac = new AbortController();
    try {
      await Promise.all(
        clients.map(async (client) => {
          for await (const b of client.batches({ signal: ac.signal, maxInFlight: 3 })) {
            const got = Buffer.concat(
              ROW_ARRAYS.map((n) => Buffer.from(b[n]!.buffer, b[n]!.byteOffset, b[n]!.byteLength)),
            );
            assert.ok(b.routedExperts instanceof Uint16Array, "routed experts: a uint16 view");
            assert.ok(got.equals(expected.get(b.batchId)!), `batch ${b.batchId} arrived intact`);
            assert.ok(
              b.tokenIds.buffer.byteLength > b.tokenIds.byteLength,
              "token ids are a view of the message, not a copy",
            );
            seen.push(b.batchId);
            await client.ack([b.batchId]);
            if (seen.length >= expected.size) ac.abort();
          }
        }),
      );
    } finally {
      for (const c of clients) c.close();
      await shutdownServer(server, 1000);
    }
    assert.deepEqual(
      [...seen].sort((a, b) => a - b),
      [...expected.keys()],
    );
  });
});
