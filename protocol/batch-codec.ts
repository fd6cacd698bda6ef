// The core's encoder of Batch messages (StreamBatches), used instead of protobufjs's for speed: batches are
// megabytes of per-token arrays, and protobufjs copies each array into a growing writer before grpc-js copies
// the whole message again into its frame. Here the small fields are encoded by protobufjs (proto-loader's
// serializer, given the message without its arrays) and the arrays are appended by hand in one pass, each
// preceded where needed by a `padding` field so that it starts 4-byte aligned counted from the start of the
// gRPC frame (5-byte prefix + message). grpc-js receivers hold each frame in freshly allocated (8-byte
// aligned) memory, so TypeScript trainers take Int32Array / Float32Array views without a copy.
// The result is the documented proto: fields in another order (which every parser accepts), plus padding.
import type { BatchMessage } from "./messages.ts";

type Serialize = (value: unknown) => Buffer;

const EMPTY = new Uint8Array(0);

const GRPC_PREFIX = 5;
const ALIGN = 4;
// A padding field: tag (field 17, length-delimited: varint 138 = 0x8a 0x01), a one-byte length, then zeros.
const PADDING_TAG = [0x8a, 0x01];
const PADDING_HEAD = PADDING_TAG.length + 1;
const ARRAY_FIELDS = [
  // 4-byte arrays first; the uint8 mask needs no alignment and goes last.
  ["offsets", 3],
  ["tokenIds", 4],
  ["logprobs", 6],
  ["advantages", 7],
  ["lossWeights", 8],
  ["callIndex", 18],
  // uint8 or uint16 expert indexes (MoE routing replay): aligned too, for uint16 views.
  ["routedExperts", 30],
  // The tree layout's int32 arrays (absent from rows batches).
  ["parents", 35],
  ["positions", 36],
  ["tokenRows", 37],
  ["rowNodes", 38],
  ["trieOffsets", 39],
  ["subtreeEnds", 41],
  ["lossMask", 5],
] as const;

const varintSize = (n: number): number => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5);

function writeVarint(out: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    out[at++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  out[at++] = n;
  return at;
}

/** Bytes of padding before a field whose data would start at `dataAt`: 0, or a whole padding field (3 to 6). */
function paddingBefore(dataAt: number): number {
  if ((GRPC_PREFIX + dataAt) % ALIGN === 0) return 0;
  return PADDING_HEAD + ((ALIGN - ((GRPC_PREFIX + dataAt + PADDING_HEAD) % ALIGN)) % ALIGN);
}

// The encoded message is written into one reused buffer: grpc-js copies a serializer's output into its frame at
// once (serializeMessage, synchronously, before any other message is serialized), and fresh multi-megabyte
// buffers cost a page fault per 4 KiB (the largest cost of a send, measured with perf). Larger messages than
// SCRATCH_MAX_BYTES get a buffer of their own rather than pinning that much memory for good.
const SCRATCH_MAX_BYTES = 64 * 1024 * 1024;
let scratch = Buffer.alloc(0);

function outputBuffer(size: number): Buffer {
  if (size > SCRATCH_MAX_BYTES) return Buffer.allocUnsafe(size);
  if (scratch.length < size)
    scratch = Buffer.allocUnsafeSlow(Math.min(SCRATCH_MAX_BYTES, Math.max(size, 2 * scratch.length)));
  return scratch.subarray(0, size);
}

/**
 * A StreamBatches response serializer built on proto-loader's (`serializeRest` encodes the small fields). What it
 * returns is valid until its next call (grpc-js has copied it by then).
 */
export function alignedBatchSerializer(serializeRest: Serialize): (message: BatchMessage) => Buffer {
  return (message) => {
    const {
      offsets,
      tokenIds,
      lossMask,
      logprobs,
      advantages,
      lossWeights,
      callIndex,
      routedExperts,
      parents,
      positions,
      tokenRows,
      rowNodes,
      trieOffsets,
      subtreeEnds,
      ...rest
    } = message;
    const arrays = {
      offsets,
      tokenIds,
      lossMask,
      logprobs,
      advantages,
      lossWeights,
      callIndex: callIndex ?? EMPTY,
      routedExperts: routedExperts ?? EMPTY,
      parents: parents ?? EMPTY,
      positions: positions ?? EMPTY,
      tokenRows: tokenRows ?? EMPTY,
      rowNodes: rowNodes ?? EMPTY,
      trieOffsets: trieOffsets ?? EMPTY,
      subtreeEnds: subtreeEnds ?? EMPTY,
    };
    const head = serializeRest(rest);
    // Sizes first (one allocation), then the writes: the same walk twice.
    let size = head.length;
    for (const [name, field] of ARRAY_FIELDS) {
      const len = arrays[name].byteLength;
      if (len === 0) continue; // proto3: an empty bytes field is not sent
      const header = varintSize((field << 3) | 2) + varintSize(len);
      size += paddingBefore(size + header) + header + len;
    }
    const out = outputBuffer(size);
    let at = head.copy(out, 0);
    for (const [name, field] of ARRAY_FIELDS) {
      const bytes = arrays[name];
      const len = bytes.byteLength;
      if (len === 0) continue;
      const header = varintSize((field << 3) | 2) + varintSize(len);
      const pad = paddingBefore(at + header);
      if (pad > 0) {
        const zeros = pad - PADDING_HEAD;
        out.set(PADDING_TAG, at);
        out[at + PADDING_TAG.length] = zeros;
        at += PADDING_HEAD;
        out.fill(0, at, at + zeros);
        at += zeros;
      }
      at = writeVarint(out, at, (field << 3) | 2);
      at = writeVarint(out, at, len);
      out.set(bytes, at);
      at += len;
    }
    return out;
  };
}
