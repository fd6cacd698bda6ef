// Token arrays are stored as little-endian int32 / float32 bytes: 4 B a token, and no per-number msgpack overhead.
import type { Routing } from "../util/routed-experts.ts";

export function packInt32(values: readonly number[] | null): Uint8Array | null {
  if (values == null) return null;
  const array = Int32Array.from(values);
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

export function packFloat32(values: readonly number[] | null): Uint8Array | null {
  if (values == null) return null;
  const array = Float32Array.from(values);
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

function copied(bytes: Uint8Array): ArrayBuffer {
  // Views read from LMDB may start at any byte offset (typed arrays need 4-byte alignment) and sit in buffers LMDB
  // reuses for its next read: copy.
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

/** Stored int32 bytes as an Int32Array of their own. */
export function int32Copy(bytes: Uint8Array): Int32Array {
  return new Int32Array(copied(bytes));
}

/** Stored float32 bytes as a Float32Array of their own. */
export function float32Copy(bytes: Uint8Array): Float32Array {
  return new Float32Array(copied(bytes));
}

/** A typed array's values as a plain array (an indexed copy: ~4x faster than Array.from's iterator). */
export function toNumbers(values: ArrayLike<number>): number[] {
  const out = new Array<number>(values.length);
  for (let i = 0; i < values.length; i++) out[i] = values[i]!;
  return out;
}

export function unpackInt32(bytes: Uint8Array | null | undefined): number[] | null {
  if (bytes == null) return null;
  return toNumbers(int32Copy(bytes));
}

export function unpackFloat32(bytes: Uint8Array | null | undefined): number[] | null {
  if (bytes == null) return null;
  return toNumbers(float32Copy(bytes));
}

/** A stored routing (R3) with bytes of its own: views read from LMDB sit in buffers it reuses. */
export function storedRouting(routing: Routing): Routing {
  return { ...routing, data: Uint8Array.prototype.slice.call(routing.data) };
}
