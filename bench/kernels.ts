// npm run bench:kernels [-- --rows 256 --min 8000 --max 32000 --repeat 5]
//
// The advantage kernels on one seeded ragged batch shaped like agent trajectories, side by side:
//   native      C++ addon, sync call, 1 thread
//   native MT   C++ addon, async call (off the event loop), all hardware threads
//   cuda        the CUDA library, where a GPU is visible (host-to-device copies included)
//   reference   the TypeScript reference (rl-core/kernels/reference.ts)
//   python      GAE as a per-timestep loop over padded numpy arrays, the way common Python trainers write
//               it (verl's compute_gae_advantage_return loop), run by /usr/bin/python3 with numpy
// Tokens/s are over all tokens of the batch (context and sampled). Best of --repeat runs after a warm-up.
// Kernel rows write into reused output buffers; estimator rows allocate their outputs, as in use.
// Targets (design.md): native >= 10x the reference, >= 100x the per-timestep loop. Never gates CI.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

import {
  computeAdvantages,
  computeAdvantagesAsync,
  type EstimatorSpec,
  type RolloutBatch,
} from "../rl-core/estimators/index.ts";
import { kernelsFor, nativeStatus, type KernelInput, type KernelName, type Kernels } from "../rl-core/kernels/index.ts";
import { randomBatch } from "../rl-core/kernels/random-batch.ts";

const { values: args } = parseArgs({
  options: {
    rows: { type: "string", default: "256" },
    min: { type: "string", default: "8000" },
    max: { type: "string", default: "32000" },
    repeat: { type: "string", default: "5" },
    seed: { type: "string", default: "7" },
  },
});
const ROWS = Number(args.rows);
const REPEAT = Math.max(1, Number(args.repeat));
const GAMMA = 0.99;
const LAMBDA = 0.95;

const reference = kernelsFor("reference")!;
const native = kernelsFor("native-cpu");
const cuda = kernelsFor("native-cuda");
const threads = Number(process.env.RLGATE_THREADS) || nativeStatus.hardwareThreads;

console.log(`rlgate kernel bench: ${ROWS} rows x ${args.min}-${args.max} tokens, best of ${REPEAT}`);
console.log(
  `native: ${native ? `loaded (${nativeStatus.simd}), ${threads} threads for MT` : `NOT LOADED (${nativeStatus.error})`}`,
);
// `npm run bench:kernels` runs with the malloc settings `rlgate core` runs with (bin/rlgate.js): batch-sized outputs
// reused from the heap instead of fresh, page-faulting mmaps.
console.log(
  `malloc: ${process.env.GLIBC_TUNABLES ? `GLIBC_TUNABLES=${process.env.GLIBC_TUNABLES}` : "glibc defaults (estimator outputs page-fault; see the note below the table)"}`,
);
console.log(
  `cuda:   ${cuda ? `${nativeStatus.cudaDevices} device(s)` : `skipped (library ${nativeStatus.cudaLibrary}, ${nativeStatus.cudaDevices} devices)`}`,
);

const t0 = performance.now();
const b = randomBatch(Number(args.seed), {
  rows: ROWS,
  minLen: Number(args.min),
  maxLen: Number(args.max),
  meanRun: 256,
  groupSize: 8,
});
const TOKENS = b.mask.length;
console.log(
  `batch: ${TOKENS.toLocaleString()} tokens, ${((b.mask.reduce((s, m) => s + m, 0) / TOKENS) * 100).toFixed(0)}% trained, built in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
);

const batch: RolloutBatch = { offsets: b.offsets, lossMask: b.mask, rewards: b.rowRewards, groupIds: b.groupIds };

type Run = (k: Kernels, threads: number) => unknown;
interface Case {
  name: string;
  sync: Run;
  async: Run;
}

// Kernels write into a buffer reused across runs (as a server reusing its batch buffers would), so the
// columns compare computation, not page faults of fresh allocations. Estimators allocate, as they do.
function kernelCase<K extends KernelName>(name: string, kernel: K, input: KernelInput<K>): Case {
  const outs = new Map<string, unknown>();
  const outFor = (k: Kernels) => {
    if (!outs.has(k.backend)) outs.set(k.backend, (k[kernel] as (i: unknown) => unknown)(input));
    return outs.get(k.backend);
  };
  return {
    name,
    sync: (k) => (k[kernel] as (i: unknown, o: object) => unknown)(input, { out: outFor(k) }),
    async: (k, threads) =>
      (k[`${kernel}Async`] as (i: unknown, o: object) => unknown)(input, { out: outFor(k), threads }),
  };
}

const CASES: Case[] = [
  kernelCase("maskedGae", "maskedGae", {
    offsets: b.offsets,
    rewards: b.tokenRewards,
    values: b.values,
    mask: b.mask,
    gamma: GAMMA,
    lambda: LAMBDA,
  }),
  kernelCase("maskedWhiten", "maskedWhiten", { offsets: b.offsets, x: b.values, mask: b.mask }),
  kernelCase("broadcastRows", "broadcastRows", { offsets: b.offsets, rowValues: b.rowRewards, mask: b.mask }),
  kernelCase("importanceWeights", "importanceWeights", {
    logpOld: b.logpOld,
    logpRollout: b.logpRollout,
    mask: b.mask,
    cap: 2,
  }),
  kernelCase("klDivergence k3", "klDivergence", { logp: b.logpOld, logpRef: b.logpRef, mask: b.mask, kind: "k3" }),
  kernelCase("lossWeights", "lossWeights", { offsets: b.offsets, mask: b.mask, mode: "seq-mean-token-mean" }),
  ...(
    [
      ["GRPO estimator", { estimator: "grpo" }],
      ["RF++-baseline estimator", { estimator: "reinforce++-baseline" }],
      ["GAE estimator (+whiten)", { estimator: "gae", values: b.values, gamma: GAMMA, lambda: LAMBDA }],
    ] as [string, EstimatorSpec][]
  ).map(([name, spec]): Case => ({
    name,
    sync: (k) => computeAdvantages(batch, spec, { kernels: k }),
    async: (k, threads) => computeAdvantagesAsync(batch, spec, { kernels: k, threads }),
  })),
];

// Minor page faults of the fastest run, the last one measured (see the note printed under the table).
let bestFaults = 0;

async function best(fn: () => unknown): Promise<number> {
  await fn(); // warm-up (JIT, page faults)
  let min = Infinity;
  for (let i = 0; i < REPEAT; i++) {
    const faults = process.resourceUsage().minorPageFault;
    const start = performance.now();
    await fn();
    const ms = performance.now() - start;
    if (ms < min) {
      min = ms;
      bestFaults = process.resourceUsage().minorPageFault - faults;
    }
  }
  return min;
}

/** verl-style per-timestep GAE over padded numpy arrays; returns ms for the loop, or a reason. */
function pythonGae(): { ms: number; maxDiff: number } | string {
  const dir = mkdtempSync(join(tmpdir(), "rlgate-bench-"));
  try {
    writeFileSync(join(dir, "offsets.bin"), b.offsets);
    writeFileSync(join(dir, "mask.bin"), b.mask);
    writeFileSync(join(dir, "rewards.bin"), b.tokenRewards);
    writeFileSync(join(dir, "values.bin"), b.values);
    const script = `
import sys, time
import numpy as np
d = sys.argv[1]; gamma, lam = ${GAMMA}, ${LAMBDA}
off = np.fromfile(d + "/offsets.bin", dtype=np.int32)
mask = np.fromfile(d + "/mask.bin", dtype=np.uint8)
rew = np.fromfile(d + "/rewards.bin", dtype=np.float32)
val = np.fromfile(d + "/values.bin", dtype=np.float32)
rows = len(off) - 1
T = int((off[1:] - off[:-1]).max()) if rows else 0
R = np.zeros((rows, T), np.float32); V = np.zeros((rows, T), np.float32); M = np.zeros((rows, T), np.float32)
for r in range(rows):
    b, e = off[r], off[r + 1]
    R[r, :e - b] = rew[b:e]; V[r, :e - b] = val[b:e]; M[r, :e - b] = mask[b:e]
start = time.perf_counter()
nextvalues = np.zeros(rows, np.float32); lastgaelam = np.zeros(rows, np.float32)
adv = np.zeros((rows, T), np.float32)
for t in reversed(range(T)):
    delta = R[:, t] + gamma * nextvalues - V[:, t]
    lastgaelam_ = delta + gamma * lam * lastgaelam
    nextvalues = V[:, t] * M[:, t] + (1 - M[:, t]) * nextvalues
    lastgaelam = lastgaelam_ * M[:, t] + (1 - M[:, t]) * lastgaelam
    adv[:, t] = lastgaelam
elapsed = time.perf_counter() - start
out = np.zeros(len(rew), np.float32)
for r in range(rows):
    b, e = off[r], off[r + 1]
    out[b:e] = adv[r, :e - b] * M[r, :e - b]
out.tofile(d + "/adv.bin")
print(elapsed * 1000)
`;
    const r = spawnSync("/usr/bin/python3", ["-c", script, dir], { encoding: "utf8", timeout: 120_000 });
    if (r.error) return `python column skipped: /usr/bin/python3 not runnable (${r.error.message})`;
    if (r.status !== 0) {
      const why = /No module named 'numpy'/.test(r.stderr)
        ? "numpy missing (apt-get install python3-numpy)"
        : r.stderr.trim().split("\n").at(-1);
      return `python column skipped: ${why}`;
    }
    const ms = Number(r.stdout.trim());
    const theirs = new Float32Array(readFileSync(join(dir, "adv.bin")).buffer.slice(0));
    const ours = reference.maskedGae({
      offsets: b.offsets,
      rewards: b.tokenRewards,
      values: b.values,
      mask: b.mask,
      gamma: GAMMA,
      lambda: LAMBDA,
    }).advantages;
    let maxDiff = 0;
    for (let t = 0; t < ours.length; t++)
      maxDiff = Math.max(maxDiff, Math.abs(ours[t]! - theirs[t]!) / Math.max(1, Math.abs(ours[t]!)));
    return { ms, maxDiff };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const rate = (ms: number | undefined) => (ms === undefined ? "—" : `${(TOKENS / ms / 1e3).toFixed(0)}`);
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined ? "—" : `${(b / a).toFixed(1)}x`;

interface Row {
  name: string;
  native?: number;
  mt?: number;
  cuda?: number;
  ref: number;
  python?: number;
  /** Page faults of the best native (sync) run. */
  faults?: number;
}
const results: Row[] = [];
for (const c of CASES) {
  const row: Row = { name: c.name, ref: await best(() => c.sync(reference, 1)) };
  if (native) {
    row.native = await best(() => c.sync(native, 1));
    row.faults = bestFaults;
    row.mt = await best(() => c.async(native, threads));
  }
  if (cuda) row.cuda = await best(() => c.async(cuda, threads));
  results.push(row);
}
const py = pythonGae();
if (typeof py === "string") console.log(py);
else {
  results[0]!.python = py.ms;
  console.log(
    `python per-timestep loop agrees with the reference to ${py.maxDiff.toExponential(1)} (float32 accumulation)`,
  );
}

const header = [
  "kernel",
  "native",
  "native MT",
  "cuda",
  "reference",
  "python",
  "native/ref",
  "MT/ref",
  "native/py",
  "MT/py",
];
const lines = results.map((r) => [
  r.name,
  rate(r.native),
  rate(r.mt),
  rate(r.cuda),
  rate(r.ref),
  rate(r.python),
  ratio(r.native, r.ref),
  ratio(r.mt, r.ref),
  ratio(r.native, r.python),
  ratio(r.mt, r.python),
]);
const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
const fmt = (cells: string[]) =>
  cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
console.log(
  `\nMtokens/s (all ${TOKENS.toLocaleString()} tokens) and speed-ups; targets: native >= 10x reference, >= 100x python loop`,
);
console.log(fmt(header));
for (const l of lines) console.log(fmt(l));
// Estimators allocate their outputs (a token-sized Float32Array is 4 bytes x tokens); first writes into
// fresh memory page-fault, which on some VMs costs more than the kernels (~12 us per 4 KiB page on the
// Firecracker VM this was tuned on: ~60 ms for one 21 MB output). Whether a run gets fresh or recycled
// memory varies, so these rows vary from run to run; the fault counts say which it was.
const faulted = results.filter((r) => r.faults !== undefined && r.name.includes("estimator"));
if (faulted.length > 0) {
  console.log(
    `\npage faults in the best native run: ${faulted.map((r) => `${r.name} ${r.faults!.toLocaleString()}`).join(", ")}`,
  );
}
console.log(`\ntotal ${((performance.now() - t0) / 1000).toFixed(1)} s`);
