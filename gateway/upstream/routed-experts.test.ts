// Reading a call's routed experts from upstream bodies: every place the servers put them, the rows checked against
// the call's tokens, malformed or missing payloads recorded as the call's routing issue (never thrown).
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ChoiceCapture } from "../../store/records.ts";
import { encodeNpy } from "../../util/routed-experts.ts";
import {
  captureRouting,
  isRoutingOnlyChunk,
  routedPayloads,
  stripRouting,
  type RoutedExpertsSetting,
} from "./routed-experts.ts";

const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString("base64");
const npy = (rows: number): string =>
  b64(encodeNpy({ descr: "|u1", shape: [rows, 2, 2], data: new Uint8Array(rows * 4).fill(3) }));
const int32 = (rows: number): string => b64(new Uint8Array(new Int32Array(rows * 4).fill(5).buffer));
const choice = (n: number): ChoiceCapture => ({
  index: 0,
  tokenIds: Array(n).fill(1),
  logprobs: null,
  finishReason: "stop",
});
const SETTING: RoutedExpertsSetting = { topK: 2, experts: null };

test("payloads are found where vLLM and SGLang (both releases) put them, and stripped from what is kept", () => {
  const body = {
    sglext: { routed_experts: "A", cached_tokens_details: { device: 1 } },
    choices: [
      { index: 0, routed_experts: "B" },
      { index: 1, sgl_ext: { routed_experts: "C" } },
    ],
  };
  assert.deepEqual(routedPayloads(body), [
    { choice: null, format: "int32", data: "A" },
    { choice: 0, format: "npy", data: "B" },
    { choice: 1, format: "int32", data: "C" },
  ]);
  assert.equal(stripRouting(body), true);
  assert.deepEqual(body, { sglext: { cached_tokens_details: { device: 1 } }, choices: [{ index: 0 }, { index: 1 }] });
  assert.equal(stripRouting(body), false);
  assert.equal(isRoutingOnlyChunk({ choices: [], usage: null, sglext: { routed_experts: "x" } }), true);
  assert.equal(isRoutingOnlyChunk({ choices: [], usage: { prompt_tokens: 1 } }), false);
});

test("vLLM rows cover prompt + completion − 1 positions from 0; SGLang's from routed_experts_start_len", () => {
  const choices = [choice(3)];
  assert.equal(
    captureRouting([{ choice: 0, format: "npy", data: npy(6) }], [1, 2, 3, 4], choices, { startLen: 0 }, SETTING),
    null,
  );
  assert.deepEqual([choices[0]!.routing!.start, choices[0]!.routing!.rows], [0, 6]);
  const sg = [choice(3)];
  assert.equal(
    captureRouting([{ choice: null, format: "int32", data: int32(2) }], [1, 2, 3, 4], sg, { startLen: 4 }, SETTING),
    null,
  );
  assert.deepEqual([sg[0]!.routing!.start, sg[0]!.routing!.rows, sg[0]!.routing!.layers], [4, 2, 2]);
});

test("a missing, malformed or misaligned payload is the call's routing issue, and nothing is kept", () => {
  const prompt = [1, 2, 3, 4];
  const cases: Array<[Parameters<typeof captureRouting>[0], typeof SETTING, RegExp]> = [
    [[], SETTING, /sent no routed experts/],
    [[{ choice: 0, format: "npy", data: npy(5) }], SETTING, /5 rows .*\(expected 6\)/],
    [[{ choice: 0, format: "npy", data: "not base64 at all!" }], SETTING, /not base64/],
    [[{ choice: 0, format: "npy", data: b64(Uint8Array.from([0x93, 1, 2])) }], SETTING, /not a \.npy/],
    [[{ choice: null, format: "int32", data: int32(2) }], { topK: null, experts: null }, /--moe-top-k/],
    [[{ choice: null, format: "int32", data: b64(new Uint8Array(40)) }], SETTING, /10 int32 values, not 6 rows/],
    [[{ choice: 7, format: "npy", data: npy(6) }], SETTING, /choice 7/],
  ];
  for (const [payloads, setting, message] of cases) {
    const choices = [choice(3)];
    const issue = captureRouting(payloads, prompt, choices, { startLen: 0 }, setting);
    assert.match(issue ?? "", message);
    assert.equal(choices[0]!.routing, undefined);
  }
});
