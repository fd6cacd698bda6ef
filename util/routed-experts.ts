// MoE routing replay (R3): the experts each token was routed to, as inference servers send them and as rlgate keeps
// them. One routing row per token position: [layers, top_k] expert indexes. Shared by the gateway (reading upstream
// payloads), the store and reconstruction (keeping rows), the sim (writing payloads) and the clients' docs.
//
// Wire forms read here (checked against the servers' source, see docs/routing-replay.md):
// - vLLM (`--enable-return-routed-experts`): `choices[].routed_experts` = base64 of a NumPy `.npy` file, shape
//   [prompt + completion − 1, layers, top_k], dtype uint8 (≤ 256 experts) or uint16; the last sampled token was never
//   a model input, so it has no row.
// - SGLang (`return_routed_experts: true`): `sglext.routed_experts` (response level; older releases: per choice
//   `sgl_ext.routed_experts`) = base64 of raw little-endian int32, logical shape [rows, layers, top_k], rows covering
//   positions [routed_experts_start_len, seqlen − 1).
//
// Kept form: rows narrowed to uint8 (every expert index < 256) or uint16, little-endian, row-major.

export type ExpertDtype = "uint8" | "uint16";

/** Rows of routing for consecutive positions of one sequence (prompt ++ sampled ids of one choice). */
export interface Routing {
  /** Sequence position of the first row. */
  start: number;
  rows: number;
  layers: number;
  topK: number;
  dtype: ExpertDtype;
  /** rows × layers × topK expert indexes, little-endian `dtype`, row-major. */
  data: Uint8Array;
}

/** A payload that cannot be read: recorded on the call (`routingIssue`), never thrown past the capture. */
export class RoutingError extends Error {}

export function dtypeBytes(dtype: ExpertDtype): number {
  return dtype === "uint8" ? 1 : 2;
}

/** The narrowest kept dtype for expert indexes below `experts`. */
export function dtypeForExperts(experts: number): ExpertDtype {
  return experts <= 256 ? "uint8" : "uint16";
}

/** Routing values (one per layer × top_k of each row) as numbers, whatever the dtype. */
export function routingValues(routing: Pick<Routing, "dtype" | "data">): Uint8Array | Uint16Array {
  const { data } = routing;
  if (routing.dtype === "uint8") return data;
  if (data.byteOffset % 2 === 0) return new Uint16Array(data.buffer, data.byteOffset, data.byteLength / 2);
  return new Uint16Array(data.slice().buffer);
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Strict base64 (standard alphabet, padded or not): anything else is refused, not skipped as Buffer.from would. */
export function decodeBase64(text: string): Buffer {
  const clean = text.replace(/\s+/g, "");
  if (!BASE64.test(clean) || clean.length % 4 === 1) throw new RoutingError("routed_experts is not base64");
  return Buffer.from(clean, "base64");
}

export interface NpyArray {
  /** NumPy type descriptor, e.g. `|u1`, `<u2`, `<i4`. */
  descr: string;
  shape: number[];
  /** The array's bytes (a view of the payload). */
  data: Uint8Array;
}

const NPY_MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
const NPY_ITEM_BYTES: Record<string, number> = {
  "|u1": 1,
  "<u1": 1,
  "|i1": 1,
  "<u2": 2,
  "<i2": 2,
  "<u4": 4,
  "<i4": 4,
  "<i8": 8,
  "<u8": 8,
};

/** Reads a `.npy` file (format 1.0–3.0, C order, little-endian integers); a malformed one is a RoutingError. */
export function parseNpy(bytes: Uint8Array): NpyArray {
  if (bytes.length < 10 || NPY_MAGIC.some((b, i) => bytes[i] !== b)) throw new RoutingError("not a .npy payload");
  const major = bytes[6]!;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let headerStart: number;
  let headerLength: number;
  if (major === 1) {
    headerStart = 10;
    headerLength = view.getUint16(8, true);
  } else if (major === 2 || major === 3) {
    if (bytes.length < 12) throw new RoutingError(".npy header is truncated");
    headerStart = 12;
    headerLength = view.getUint32(8, true);
  } else throw new RoutingError(`.npy format version ${major} is not known`);
  if (headerStart + headerLength > bytes.length) throw new RoutingError(".npy header is truncated");
  const header = Buffer.from(bytes.buffer, bytes.byteOffset + headerStart, headerLength).toString("latin1");
  const descr = /'descr'\s*:\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape'\s*:\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr === undefined || fortran === undefined || shapeText === undefined)
    throw new RoutingError(".npy header lacks descr, fortran_order or shape");
  if (fortran === "True") throw new RoutingError(".npy array is in Fortran order");
  const item = NPY_ITEM_BYTES[descr];
  if (item === undefined) throw new RoutingError(`.npy dtype ${descr} is not a little-endian integer`);
  const shape = shapeText
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => Number(s));
  if (shape.some((n) => !Number.isInteger(n) || n < 0)) throw new RoutingError(".npy shape is not a tuple of sizes");
  const count = shape.reduce((a, b) => a * b, 1);
  const dataStart = headerStart + headerLength;
  if (bytes.length - dataStart !== count * item)
    throw new RoutingError(
      `.npy holds ${bytes.length - dataStart} data bytes, shape ${shapeText} needs ${count * item}`,
    );
  return { descr, shape, data: bytes.subarray(dataStart) };
}

/** A `.npy` file (format 1.0) of little-endian integers: what the sim sends as vLLM does (np.save). */
export function encodeNpy(array: NpyArray): Uint8Array {
  const shape = array.shape.length === 1 ? `(${array.shape[0]},)` : `(${array.shape.join(", ")})`;
  let header = `{'descr': '${array.descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  // Magic (6) + version (2) + length (2) + header + newline: padded with spaces to a multiple of 64 bytes.
  const unpadded = 10 + header.length + 1;
  header += " ".repeat((64 - (unpadded % 64)) % 64) + "\n";
  const out = new Uint8Array(10 + header.length + array.data.byteLength);
  out.set(NPY_MAGIC, 0);
  out[6] = 1;
  out[7] = 0;
  new DataView(out.buffer).setUint16(8, header.length, true);
  out.set(Buffer.from(header, "latin1"), 10);
  out.set(array.data, 10 + header.length);
  return out;
}

/** Integer values of a little-endian array of `descr` (a copy only where alignment requires it). */
function integers(descr: string, data: Uint8Array): ArrayLike<number> {
  const aligned = (n: number) => (data.byteOffset % n === 0 ? data : data.slice());
  switch (descr) {
    case "|u1":
    case "<u1":
      return data;
    case "|i1":
      return new Int8Array(data.buffer, data.byteOffset, data.byteLength);
    case "<u2": {
      const d = aligned(2);
      return new Uint16Array(d.buffer, d.byteOffset, d.byteLength / 2);
    }
    case "<i2": {
      const d = aligned(2);
      return new Int16Array(d.buffer, d.byteOffset, d.byteLength / 2);
    }
    case "<u4": {
      const d = aligned(4);
      return new Uint32Array(d.buffer, d.byteOffset, d.byteLength / 4);
    }
    case "<i4": {
      const d = aligned(4);
      return new Int32Array(d.buffer, d.byteOffset, d.byteLength / 4);
    }
    case "<i8":
    case "<u8": {
      const d = aligned(8);
      const big = descr === "<i8" ? new BigInt64Array(d.buffer, d.byteOffset, d.byteLength / 8) : null;
      const ubig = big ? null : new BigUint64Array(d.buffer, d.byteOffset, d.byteLength / 8);
      const out = new Float64Array(d.byteLength / 8);
      for (let i = 0; i < out.length; i++) out[i] = Number(big ? big[i]! : ubig![i]!);
      return out;
    }
    default:
      throw new RoutingError(`dtype ${descr} is not a little-endian integer`);
  }
}

/**
 * Expert indexes narrowed to the kept dtype: uint8 when `experts` ≤ 256 (or, unknown, when every value is below 256),
 * else uint16. A negative index, or one at or above `experts` (or 65536), is a RoutingError.
 */
export function narrowExperts(
  values: ArrayLike<number>,
  experts: number | null,
): { dtype: ExpertDtype; data: Uint8Array } {
  let max = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!Number.isInteger(v) || v < 0) throw new RoutingError(`expert index ${v} is negative or not an integer`);
    if (v > max) max = v;
  }
  const limit = experts ?? 65536;
  if (max >= limit) throw new RoutingError(`expert index ${max} is outside 0 to ${limit - 1}`);
  const dtype: ExpertDtype = experts !== null ? dtypeForExperts(experts) : max < 256 ? "uint8" : "uint16";
  if (dtype === "uint8")
    return { dtype, data: values instanceof Uint8Array ? values.slice() : Uint8Array.from(values) };
  const wide = Uint16Array.from(values);
  return { dtype, data: new Uint8Array(wide.buffer) };
}

/** vLLM's payload: base64 `.npy` of shape [rows, layers, top_k] (rows from position 0). */
export function readNpyRouting(payload: string, experts: number | null): Routing {
  const npy = parseNpy(decodeBase64(payload));
  if (npy.shape.length !== 3) throw new RoutingError(`routed_experts has shape (${npy.shape.join(", ")}), not 3-d`);
  const [rows, layers, topK] = npy.shape as [number, number, number];
  const narrowed = narrowExperts(integers(npy.descr, npy.data), experts);
  return { start: 0, rows, layers, topK, ...narrowed };
}

/**
 * SGLang's payload: base64 of raw little-endian int32, [rows, layers, top_k] flattened. `rows` is known from the
 * request (seqlen − 1 − start); `topK` from the serve options; layers follow.
 */
export function readInt32Routing(
  payload: string,
  shape: { start: number; rows: number; topK: number },
  experts: number | null,
): Routing {
  const bytes = decodeBase64(payload);
  if (bytes.length % 4 !== 0) throw new RoutingError(`routed_experts holds ${bytes.length} bytes, not int32 values`);
  const values = bytes.length / 4;
  const { start, rows, topK } = shape;
  if (rows <= 0) {
    if (values !== 0) throw new RoutingError(`routed_experts holds ${values} values for no rows`);
    return { start, rows: 0, layers: 0, topK, dtype: "uint8", data: new Uint8Array(0) };
  }
  if (values % (rows * topK) !== 0)
    throw new RoutingError(`routed_experts holds ${values} int32 values, not ${rows} rows × layers × top_k ${topK}`);
  const layers = values / (rows * topK);
  const narrowed = narrowExperts(integers("<i4", bytes), experts);
  return { start, rows, layers, topK, ...narrowed };
}

/** Rows [from, to) of a routing (positions relative to its sequence), sharing its bytes. */
export function sliceRouting(routing: Routing, from: number, to = routing.start + routing.rows): Routing {
  const a = Math.max(from, routing.start);
  const b = Math.min(to, routing.start + routing.rows);
  const width = routing.layers * routing.topK * dtypeBytes(routing.dtype);
  const rows = Math.max(0, b - a);
  const offset = (a - routing.start) * width;
  return { ...routing, start: a, rows, data: routing.data.subarray(offset, offset + rows * width) };
}
