// The routed-experts codecs: .npy files as np.save writes them (header versions, dtypes), SGLang's raw int32,
// narrowing to uint8/uint16, and refusal of malformed payloads (a RoutingError, never another exception).
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  decodeBase64,
  encodeNpy,
  narrowExperts,
  parseNpy,
  readInt32Routing,
  readNpyRouting,
  routingValues,
  RoutingError,
  sliceRouting,
} from "./routed-experts.ts";

const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString("base64");

test("np.save's header (format 1.0, padded to 64 bytes) is read back: dtype, shape, data", () => {
  const data = Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  const npy = encodeNpy({ descr: "|u1", shape: [3, 2, 2], data });
  assert.equal((npy.length - data.length) % 64, 0);
  // The exact header np.save writes for np.zeros((3, 2, 2), np.uint8).
  assert.match(
    Buffer.from(npy.subarray(10, npy.length - data.length)).toString("latin1"),
    /^\{'descr': '\|u1', 'fortran_order': False, 'shape': \(3, 2, 2\), \}/,
  );
  const parsed = parseNpy(npy);
  assert.equal(parsed.descr, "|u1");
  assert.deepEqual(parsed.shape, [3, 2, 2]);
  assert.deepEqual(Array.from(parsed.data), Array.from(data));
});

test("format 2.0 headers (4-byte length) and 1-d shapes are read", () => {
  const header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }".padEnd(115, " ") + "\n";
  const out = new Uint8Array(12 + header.length + 8);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 2, 0]);
  new DataView(out.buffer).setUint32(8, header.length, true);
  out.set(Buffer.from(header, "latin1"), 12);
  new DataView(out.buffer).setInt32(12 + header.length, 7, true);
  new DataView(out.buffer).setInt32(12 + header.length + 4, 300, true);
  const parsed = parseNpy(out);
  assert.deepEqual(parsed.shape, [2]);
  assert.equal(parsed.descr, "<i4");
});

test("vLLM's payload: uint8, uint16 and int32 .npy become kept routing (narrowed by --moe-experts or by value)", () => {
  const u16 = Uint16Array.from([0, 1, 299, 2, 3, 4]);
  const wide = readNpyRouting(
    b64(encodeNpy({ descr: "<u2", shape: [1, 3, 2], data: new Uint8Array(u16.buffer) })),
    null,
  );
  assert.deepEqual([wide.rows, wide.layers, wide.topK, wide.dtype], [1, 3, 2, "uint16"]);
  assert.deepEqual(Array.from(routingValues(wide)), [0, 1, 299, 2, 3, 4]);
  const i32 = Int32Array.from([5, 6, 7, 8]);
  const narrow = readNpyRouting(
    b64(encodeNpy({ descr: "<i4", shape: [2, 1, 2], data: new Uint8Array(i32.buffer) })),
    null,
  );
  assert.equal(narrow.dtype, "uint8");
  assert.deepEqual(Array.from(narrow.data), [5, 6, 7, 8]);
  // --moe-experts 512: uint16 even when this call's values are small (one dtype a rollout).
  const declared = readNpyRouting(
    b64(encodeNpy({ descr: "<i4", shape: [2, 1, 2], data: new Uint8Array(i32.buffer) })),
    512,
  );
  assert.equal(declared.dtype, "uint16");
  assert.equal(declared.data.byteLength, 8);
});

test("SGLang's payload: raw int32 rows from routed_experts_start_len, layers from the size and top_k", () => {
  const values = Int32Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]); // 2 rows × 3 layers × 2
  const routing = readInt32Routing(b64(new Uint8Array(values.buffer)), { start: 40, rows: 2, topK: 2 }, 64);
  assert.deepEqual([routing.start, routing.rows, routing.layers, routing.topK, routing.dtype], [40, 2, 3, 2, "uint8"]);
  const tail = sliceRouting(routing, 41);
  assert.deepEqual([tail.start, tail.rows], [41, 1]);
  assert.deepEqual(Array.from(tail.data), [7, 8, 9, 10, 11, 12]);
  assert.equal(sliceRouting(routing, 50).rows, 0);
});

test("narrowing: uint8 below 256, uint16 above, refused when negative or beyond the experts", () => {
  assert.equal(narrowExperts([0, 255], null).dtype, "uint8");
  assert.equal(narrowExperts([0, 256], null).dtype, "uint16");
  assert.throws(() => narrowExperts([-1], null), RoutingError);
  assert.throws(() => narrowExperts([64], 64), RoutingError);
  assert.throws(() => narrowExperts([70_000], null), RoutingError);
});

test("malformed payloads are refused with a RoutingError that says what is wrong", () => {
  const cases: Array<[string, () => unknown, RegExp]> = [
    ["not base64", () => decodeBase64("@@@!"), /not base64/],
    ["not .npy", () => readNpyRouting(b64(Uint8Array.from([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])), null), /not a \.npy/],
    [
      "truncated data",
      () =>
        readNpyRouting(
          b64(encodeNpy({ descr: "|u1", shape: [2, 2, 2], data: new Uint8Array(8) }).subarray(0, 130)),
          null,
        ),
      /data bytes/,
    ],
    [
      "2-d",
      () => readNpyRouting(b64(encodeNpy({ descr: "|u1", shape: [2, 2], data: new Uint8Array(4) })), null),
      /not 3-d/,
    ],
    [
      "float",
      () => readNpyRouting(b64(encodeNpy({ descr: "<f4", shape: [1, 1, 1], data: new Uint8Array(4) })), null),
      /integer/,
    ],
    ["odd int32 size", () => readInt32Routing(b64(new Uint8Array(6)), { start: 0, rows: 1, topK: 1 }, null), /int32/],
    ["rows × top_k", () => readInt32Routing(b64(new Uint8Array(12)), { start: 0, rows: 2, topK: 2 }, null), /rows/],
  ];
  for (const [name, run, message] of cases)
    assert.throws(run, (e: unknown) => e instanceof RoutingError && message.test(e.message), name);
  // Fortran order and an unknown version.
  const npy = encodeNpy({ descr: "|u1", shape: [1, 1, 1], data: new Uint8Array(1) });
  const fortran = Buffer.from(Buffer.from(npy).toString("latin1").replace("False", "True "), "latin1");
  assert.throws(() => parseNpy(fortran), /Fortran/);
  const v9 = Uint8Array.from(npy);
  v9[6] = 9;
  assert.throws(() => parseNpy(v9), /version 9/);
});
