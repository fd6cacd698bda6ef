// Helpers for the kernel and estimator tests: closeness checks and backend availability with clear skips.
import assert from "node:assert/strict";
import type { TestContext } from "node:test";

import { kernelsFor, nativeStatus, type Kernels } from "./index.ts";

export const TOLERANCE = 1e-5;

/** a === b or |a - b| <= tol * max(1, |b|) element-wise; NaN only matches NaN. */
export function assertClose(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  label: string,
  tol = TOLERANCE,
): void {
  assert.equal(actual.length, expected.length, `${label}: length`);
  for (let i = 0; i < expected.length; i++) {
    const a = actual[i]!;
    const b = expected[i]!;
    if (Number.isNaN(b)) {
      assert.ok(Number.isNaN(a), `${label}[${i}]: expected NaN, got ${a}`);
      continue;
    }
    if (a !== b && !(Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)))) {
      assert.fail(`${label}[${i}]: got ${a}, expected ${b} (tolerance ${tol})`);
    }
  }
}

/**
 * The native CPU backend, or null after skipping the test with the reason. With RLGATE_REQUIRE_NATIVE=1
 * (set by CI) a missing addon fails the test instead.
 */
export function nativeOrSkip(t: TestContext): Kernels | null {
  const k = kernelsFor("native-cpu");
  if (k) return k;
  const why = `native addon not loaded: ${nativeStatus.error}`;
  if (process.env.RLGATE_REQUIRE_NATIVE === "1") assert.fail(`${why} (RLGATE_REQUIRE_NATIVE=1)`);
  t.skip(why);
  return null;
}

export function cudaUnavailableReason(): string {
  if (!nativeStatus.loaded) return `native addon not loaded: ${nativeStatus.error}`;
  if (process.env.RLGATE_CUDA === "0") return "disabled by RLGATE_CUDA=0";
  if (nativeStatus.cudaLibrary === "absent") return "CUDA kernels not built here (no nvcc at build time)";
  if (nativeStatus.cudaLibrary === "broken") return "rlgate_cuda.so failed to load (rebuild with npm run build:native)";
  return "no GPU visible to the CUDA runtime";
}

/**
 * The all-CUDA backend, or null after skipping with "no CUDA device: <why>". With RLGATE_REQUIRE_CUDA=1
 * (set by native/cuda/gpu-check.sh) a missing device fails the test instead.
 */
export function cudaOrSkip(t: TestContext): Kernels | null {
  const k = kernelsFor("native-cuda");
  if (k) return k;
  const why = `no CUDA device: ${cudaUnavailableReason()}`;
  if (process.env.RLGATE_REQUIRE_CUDA === "1") assert.fail(`${why} (RLGATE_REQUIRE_CUDA=1)`);
  t.skip(why);
  return null;
}

/** The backends available here, reference first, for running the same hand-computed cases on each. */
export function availableBackends(): Kernels[] {
  return [kernelsFor("reference"), kernelsFor("native-cpu"), kernelsFor("native-cuda")].filter(
    (k): k is Kernels => k !== null,
  );
}
