// The seeded fuzz suite, bounded for every test run: a few thousand hostile inputs over every route, method, header
// and body shape, and raw bytes on the socket, against an open gateway and one with --token (and so --require-key).
// `npm run fuzz` runs the same longer and prints its figures.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { GEMINI_MODEL_MAP } from "./fuzz/inputs.ts";
import { formatFigures, runFuzz } from "./fuzz/run.ts";
import { startStack, type Stack } from "./helpers.ts";

const INPUTS = Number(process.env.RLGATE_FUZZ_TEST_INPUTS ?? 1600);
const TOKEN = "fuzz-token";

let open: Stack;
let closed: Stack;
before(async () => {
  open = await startStack({ gateway: { modelMap: GEMINI_MODEL_MAP } });
  closed = await startStack({ gateway: { controlToken: TOKEN } });
});
after(async () => {
  await open.close();
  await closed.close();
});

test(
  `fuzz: ${INPUTS} seeded hostile inputs leave the gateway answering, every error well-formed, memory flat`,
  { timeout: 240_000 },
  async (t) => {
    const figures = await runFuzz({ gateway: open.gateway, seed: 11, count: INPUTS });
    const report = formatFigures(figures);
    t.diagnostic(report);
    assert.equal(figures.failures.length, 0, report);
    assert.equal(figures.inputs, INPUTS);
    // Flat: what a few thousand requests leave behind after a full GC is bounded caches, not a leak per request.
    assert.ok(figures.memoryAfter.heapMb - figures.memoryBefore.heapMb < 48, report);
    assert.ok((figures.byStatus["200"] ?? 0) > INPUTS / 20, `too few inputs reached the upstream: ${report}`);
    assert.equal((await fetch(`${open.gateway.url}/healthz`)).status, 200);
  },
);

test(
  "fuzz: the same against a gateway with --token: nothing gets through without credentials, all answered",
  { timeout: 240_000 },
  async (t) => {
    const count = Math.ceil(INPUTS / 4); // 400 by default: 2,000 inputs in all
    const figures = await runFuzz({
      gateway: closed.gateway,
      seed: 12,
      count,
      warmup: 100,
      controlHeaders: { authorization: `Bearer ${TOKEN}` },
    });
    const report = formatFigures(figures);
    t.diagnostic(report);
    assert.equal(figures.failures.length, 0, report);
    assert.ok((figures.byStatus["401"] ?? 0) > count / 5, report);
    // The only rollouts are the driver's: no fuzzed request without the token created one.
    const listed = await fetch(`${closed.gateway.url}/api/rollouts`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const { rollouts } = (await listed.json()) as { rollouts: Array<{ group: string | null }> };
    assert.ok(
      rollouts.every((r) => r.group !== "fuzz"),
      "a rollout was created without the token",
    );
  },
);
