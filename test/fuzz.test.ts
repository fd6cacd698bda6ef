// The seeded fuzz suite, bounded for every test run: a few thousand hostile inputs over every route, method, header
// and body shape, and raw bytes on the socket. `npm run fuzz` runs the same longer and prints its figures.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { formatFigures, runFuzz } from "./fuzz/run.ts";
import { startStack, type Stack } from "./helpers.ts";

const INPUTS = Number(process.env.RLGATE_FUZZ_TEST_INPUTS ?? 2500);

let stack: Stack;
before(async () => {
  stack = await startStack();
});
after(async () => {
  await stack.close();
});

test(`fuzz: ${INPUTS} seeded hostile inputs leave the gateway answering, every error well-formed, memory flat`, { timeout: 240_000 }, async (t) => {
  const figures = await runFuzz({ gateway: stack.gateway, seed: 11, count: INPUTS });
  const report = formatFigures(figures);
  t.diagnostic(report);
  assert.equal(figures.failures.length, 0, report);
  assert.equal(figures.inputs, INPUTS);
  // Flat: what a few thousand requests leave behind after a full GC is bounded caches, not a leak per request.
  assert.ok(figures.memoryAfter.heapMb - figures.memoryBefore.heapMb < 48, report);
  assert.equal((await fetch(`${stack.gateway.url}/healthz`)).status, 200);
});
