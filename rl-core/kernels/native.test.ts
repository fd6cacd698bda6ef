// Native (C++) kernels against the TypeScript reference on seeded random ragged batches, sync against
// async (off the event loop, several threads), and the switches that pick the backend.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { kernelsFor, nativeStatus, type Kernels } from "./index.ts";
import { randomBatch, randomForest, seededRandom, type RandomBatch } from "./random-batch.ts";
import { assertClose, nativeOrSkip } from "./test-support.ts";

const reference = kernelsFor("reference")!;

const SHAPES = [
  { name: "small ragged, empty rows", seed: 1, rows: 37, minLen: 0, maxLen: 700, emptyRowRate: 0.15, meanRun: 9 },
  { name: "one row", seed: 2, rows: 1, minLen: 5000, maxLen: 5000 },
  { name: "no rows", seed: 3, rows: 0, minLen: 0, maxLen: 0 },
  { name: "256k tokens (splits over threads)", seed: 4, rows: 64, minLen: 2000, maxLen: 6000, meanRun: 200 },
];

/** Every kernel on one batch, as [label, output arrays]. */
async function runAll(k: Kernels, b: RandomBatch, seed: number, mode: "sync" | "async", threads: number) {
  const run = <T>(name: string, input: unknown): Promise<T> | T => {
    const fn = (mode === "sync" ? k[name as "rowCounts"] : k[`${name}Async` as "rowCountsAsync"]) as (
      i: unknown,
      o: { threads: number },
    ) => T | Promise<T>;
    return fn(input, { threads });
  };
  const rows = b.offsets.length - 1;
  const tokens = b.mask.length;
  const rand = seededRandom(seed * 7919);
  const rowSegment = Int32Array.from({ length: rows }, () => Math.floor(rand() * 4) - 1);
  const rowValues = Float64Array.from({ length: rows }, () => rand() * 4 - 2);
  const gatherValues = Float64Array.from({ length: 97 }, () => rand() * 10 - 5);
  const index = Int32Array.from({ length: tokens }, () => Math.floor(rand() * 98) - 1);
  const forest = randomForest(seed, 300, 7);
  const leafNode = Int32Array.from({ length: 120 }, () =>
    rand() < 0.1 ? -1 : forest.leaves[Math.floor(rand() * forest.leaves.length)]!,
  );
  const leafReward = Float64Array.from({ length: 120 }, () => rand());
  const stats = await run<{ count: Int32Array; mean: Float64Array; std: Float64Array; weightedMean: Float64Array }>(
    "groupStats",
    {
      values: b.rowRewards,
      groupIds: b.groupIds,
      numGroups: b.numGroups,
      weights: Float64Array.from(b.rowRewards, (_, i) => 1 + (i % 5)),
    },
  );
  const gae = await run<{ advantages: Float32Array; returns: Float32Array }>("maskedGae", {
    offsets: b.offsets,
    rewards: b.tokenRewards,
    values: b.values,
    mask: b.mask,
    gamma: 0.99,
    lambda: 0.95,
  });
  // Outcome rewards as row rewards (no token array), and both kinds at once.
  const gaeRow = await run<{ advantages: Float32Array; returns: Float32Array }>("maskedGae", {
    offsets: b.offsets,
    rowRewards: rowValues,
    values: b.values,
    mask: b.mask,
    gamma: 0.99,
    lambda: 0.95,
  });
  const gaeBoth = await run<{ advantages: Float32Array; returns: Float32Array }>("maskedGae", {
    offsets: b.offsets,
    rewards: b.tokenRewards,
    rowRewards: rowValues,
    values: b.values,
    mask: b.mask,
    gamma: 0.9,
    lambda: 1,
  });
  const tree = await run<{ value: Float64Array; leafCount: Int32Array }>("treeNodeValues", {
    parent: forest.parent,
    leafNode,
    leafReward,
  });
  const out: [string, ArrayLike<number>][] = [
    ["groupStats.count", stats.count],
    ["groupStats.mean", stats.mean],
    ["groupStats.std", stats.std],
    ["groupStats.weightedMean", stats.weightedMean],
    ["broadcastRows", await run("broadcastRows", { offsets: b.offsets, rowValues, mask: b.mask })],
    ["gatherTokens", await run("gatherTokens", { values: gatherValues, index, mask: b.mask })],
    ["rowCounts", await run("rowCounts", { offsets: b.offsets, mask: b.mask })],
    ["maskedGae.advantages", gae.advantages],
    ["maskedGae.returns", gae.returns],
    ["maskedGae(rowRewards).advantages", gaeRow.advantages],
    ["maskedGae(rowRewards).returns", gaeRow.returns],
    ["maskedGae(both).advantages", gaeBoth.advantages],
    ["maskedWhiten", await run("maskedWhiten", { offsets: b.offsets, x: b.values, mask: b.mask })],
    [
      "maskedWhiten(segments)",
      await run("maskedWhiten", {
        offsets: b.offsets,
        x: b.values,
        mask: b.mask,
        rowSegment,
        numSegments: 3,
        shiftMean: false,
      }),
    ],
    ["treeNodeValues.value", tree.value],
    ["treeNodeValues.leafCount", tree.leafCount],
    [
      "importanceWeights",
      await run("importanceWeights", { logpOld: b.logpOld, logpRollout: b.logpRollout, mask: b.mask, cap: 1.05 }),
    ],
  ];
  for (const kind of ["k1", "k2", "k3"] as const) {
    out.push([
      `klDivergence.${kind}`,
      await run("klDivergence", { logp: b.logpOld, logpRef: b.logpRef, mask: b.mask, kind }),
    ]);
  }
  for (const mode of ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"] as const) {
    out.push([`lossWeights.${mode}`, await run("lossWeights", { offsets: b.offsets, mask: b.mask, mode })]);
  }
  return out;
}

describe("native kernels vs the TypeScript reference", () => {
  for (const shape of SHAPES) {
    test(`every kernel within 1e-5 on a random batch: ${shape.name}`, async (t) => {
      const native = nativeOrSkip(t);
      if (!native) return;
      const batch = randomBatch(shape.seed, shape);
      const expected = await runAll(reference, batch, shape.seed, "sync", 1);
      const actual = await runAll(native, batch, shape.seed, "sync", 1);
      for (const [i, [label, want]] of expected.entries()) assertClose(actual[i]![1], want, label);
    });

    test(`async (threads 4) equals sync (1 thread): ${shape.name}`, async (t) => {
      const native = nativeOrSkip(t);
      if (!native) return;
      const batch = randomBatch(shape.seed, shape);
      const sync = await runAll(native, batch, shape.seed, "sync", 1);
      const threaded = await runAll(native, batch, shape.seed, "async", 4);
      for (const [i, [label, want]] of sync.entries()) {
        // Only the whitening sums are reduced in a different order across threads.
        if (label.startsWith("maskedWhiten")) assertClose(threaded[i]![1], want, label, 1e-6);
        else assert.deepEqual(threaded[i]![1], want, label);
      }
    });
  }

  test("vectorized exp: importance weights and k3 match Math.exp across float's range, overflow, underflow, NaN", (t) => {
    const native = nativeOrSkip(t);
    if (!native) return;
    const n = 20001;
    const logpOld = Float32Array.from({ length: n }, (_, i) => -110 + (i * 200) / (n - 1));
    const special = [800, -800, NaN, 0, 88.7, -103];
    const old = Float32Array.from([...logpOld, ...special]);
    const zero = new Float32Array(old.length);
    for (const cap of [Infinity, 3]) {
      const input = { logpOld: old, logpRollout: zero, cap };
      assertClose(native.importanceWeights(input), reference.importanceWeights(input), `importance cap ${cap}`, 1e-6);
    }
    const kl = { logp: zero, logpRef: old, kind: "k3" as const };
    assertClose(native.klDivergence(kl), reference.klDivergence(kl), "k3", 1e-6);
  });

  // The CPU kernels are compiled for AVX-512, AVX2 and the x86-64 baseline, and run the best the CPU has:
  // the tests above cover that one; these run them again in a child process capped to each narrower one.
  const CHILD_TESTS = "within 1e-5|equals sync|vectorized exp|version in use";
  for (const isa of ["avx2", "base"] as const) {
    test(`the ${isa} version of the CPU kernels matches the reference too (RLGATE_SIMD=${isa})`, (t) => {
      if (!nativeOrSkip(t)) return;
      if (process.env.RLGATE_SIMD)
        return t.skip(`this process already runs with RLGATE_SIMD=${process.env.RLGATE_SIMD}`);
      if (isa === "avx2" && nativeStatus.simd !== "avx512") return t.skip(`this CPU's best is ${nativeStatus.simd}`);
      const r = spawnSync(
        process.execPath,
        [
          "--import",
          "tsx",
          "--test",
          "--test-reporter=tap",
          `--test-name-pattern=${CHILD_TESTS}`,
          fileURLToPath(import.meta.url),
        ],
        // Without NODE_TEST_CONTEXT, which the test runner sets and which would make the child report in its
        // internal format.
        {
          env: { ...process.env, NODE_TEST_CONTEXT: undefined, RLGATE_SIMD: isa, RLGATE_REQUIRE_NATIVE: "1" },
          encoding: "utf8",
        },
      );
      assert.equal(r.status, 0, `RLGATE_SIMD=${isa}:\n${r.stdout}\n${r.stderr}`);
      const passed = Number(/^# pass (\d+)/m.exec(r.stdout)?.[1] ?? 0);
      assert.ok(passed >= 2 * SHAPES.length + 2, `RLGATE_SIMD=${isa}: only ${passed} tests ran\n${r.stdout}`);
    });
  }

  test("the version in use honours RLGATE_SIMD", (t) => {
    if (!nativeOrSkip(t)) return;
    const cap = process.env.RLGATE_SIMD;
    if (cap === "base") assert.equal(nativeStatus.simd, "base");
    else if (cap === "avx2")
      assert.ok(nativeStatus.simd === "avx2" || nativeStatus.simd === "base", String(nativeStatus.simd));
    else assert.ok(["avx512", "avx2", "base"].includes(String(nativeStatus.simd)), String(nativeStatus.simd));
  });

  test("async kernels leave the event loop free while they run", async (t) => {
    const native = nativeOrSkip(t);
    if (!native) return;
    const b = randomBatch(11, { rows: 128, minLen: 8000, maxLen: 16000, meanRun: 300 });
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const started = performance.now();
    const input = { offsets: b.offsets, x: b.values, mask: b.mask };
    // At least 10 calls and 50 ms of them, so a fast machine still spans several timer periods.
    for (let i = 0; i < 10 || performance.now() - started < 50; i++) await native.maskedWhitenAsync(input);
    const elapsed = performance.now() - started;
    clearInterval(timer);
    assert.ok(ticks >= 2, `expected timer ticks during ${elapsed.toFixed(1)} ms of async work, got ${ticks}`);
  });
});

describe("backend selection", () => {
  const indexUrl = new URL("./index.ts", import.meta.url).href;
  const probe = (env: Record<string, string>) => {
    const r = spawnSync(
      process.execPath,
      [
        "--import",
        "tsx",
        "--input-type=module",
        "-e",
        `const m = await import(${JSON.stringify(indexUrl)}); console.log(JSON.stringify({ backend: m.backend, error: m.nativeStatus.error }));`,
      ],
      { env: { ...process.env, ...env }, encoding: "utf8" },
    );
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { backend: string; error: string | null };
  };

  test("RLGATE_NATIVE=0 forces the reference", () => {
    const seen = probe({ RLGATE_NATIVE: "0" });
    assert.equal(seen.backend, "reference");
    assert.match(seen.error!, /RLGATE_NATIVE=0/);
  });

  test("RLGATE_CUDA=0 keeps native on the CPU", (t) => {
    if (!nativeOrSkip(t)) return;
    assert.equal(probe({ RLGATE_CUDA: "0" }).backend, "native-cpu");
  });

  test("the addon reports how the CUDA library stands", (t) => {
    if (!nativeOrSkip(t)) return;
    assert.ok(["absent", "loaded"].includes(nativeStatus.cudaLibrary), `cudaLibrary ${nativeStatus.cudaLibrary}`);
    assert.ok(nativeStatus.hardwareThreads >= 1);
  });
});
