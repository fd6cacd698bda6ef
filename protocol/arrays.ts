// Per-token arrays travel as little-endian bytes. Typed arrays are host-endian, so this module refuses to
// load on a big-endian host; views are taken without a copy where the bytes are aligned.
import { endianness } from "node:os";
import { LinkError } from "./errors.ts";

if (endianness() !== "LE") throw new Error("rlgate's wire format is little-endian; this host is big-endian");

/** The bytes of a typed array, as a Buffer sharing its memory. */
export function bytesOf(view: ArrayBufferView): Buffer {
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength);
}

type TypedCtor<T> = {
  new (length: number): T;
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): T;
  BYTES_PER_ELEMENT: number;
};

function view<T extends ArrayBufferView>(Ctor: TypedCtor<T>, bytes: Uint8Array, what: string): T {
  const size = Ctor.BYTES_PER_ELEMENT;
  if (bytes.byteLength % size !== 0) {
    throw new LinkError(
      "RLGATE_BAD_REQUEST",
      `${what}: ${bytes.byteLength} bytes is not a whole number of ${size}-byte values`,
    );
  }
  const n = bytes.byteLength / size;
  if (bytes.byteOffset % size === 0) return new Ctor(bytes.buffer, bytes.byteOffset, n);
  const out = new Ctor(n); // unaligned (e.g. inside a protobuf message): one copy
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

export const int32s = (bytes: Uint8Array, what = "int32 array"): Int32Array => view(Int32Array, bytes, what);
export const float32s = (bytes: Uint8Array, what = "float32 array"): Float32Array => view(Float32Array, bytes, what);
export const float64s = (bytes: Uint8Array, what = "float64 array"): Float64Array => view(Float64Array, bytes, what);
export const uint8s = (bytes: Uint8Array): Uint8Array =>
  new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/** Checks a ragged layout: rows + 1 offsets from 0, non-decreasing, ending at `tokens`. */
export function checkOffsets(offsets: Int32Array, rows: number, tokens: number): string | null {
  if (offsets.length !== rows + 1) return `offsets has ${offsets.length} entries, expected rows + 1 = ${rows + 1}`;
  if (offsets[0] !== 0) return "offsets[0] must be 0";
  for (let r = 0; r < rows; r++) if (offsets[r + 1]! < offsets[r]!) return `offsets decrease at row ${r}`;
  if (offsets[rows] !== tokens) return `offsets end at ${offsets[rows]}, but there are ${tokens} tokens`;
  return null;
}

/** Concatenates typed arrays of one kind. */
export function concatTyped<T extends Int32Array | Uint8Array | Float32Array>(
  Ctor: { new (length: number): T },
  parts: readonly T[],
): T {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Ctor(n);
  let at = 0;
  for (const p of parts) {
    out.set(p as never, at);
    at += p.length;
  }
  return out;
}
