// The one module that loads the native addon (native/build/Release/rlgate_native.node, built with
// `npm run build:native`). It picks the backend once, at import:
//   native-cuda  addon loaded, CUDA library present and a device visible (token kernels on the GPU for
//                calls of at least RLGATE_CUDA_MIN_TOKENS tokens, default 262144; smaller ones on the CPU)
//   native-cpu   addon loaded (no CUDA library, no device, or RLGATE_CUDA=0)
//   reference    addon missing or failing to load, or RLGATE_NATIVE=0
// RLGATE_THREADS sets the default thread count of async calls (default: all hardware threads); RLGATE_SIMD
// caps the instruction set of the native CPU kernels (avx2 or base; default: the CPU's best).
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

import { NATIVE_ABI, nativeKernels, type NativeAddon } from "./native-backend.ts";
import { referenceKernels } from "./reference.ts";
import type { Backend, Kernels } from "./types.ts";

export * from "./types.ts";
export { KernelError, KernelStatus, checkStatus } from "./errors.ts";
export { referenceKernels } from "./reference.ts";

/** The addon; RLGATE_NATIVE_ADDON points elsewhere (the CUDA emulation test loads a copy next to an emulated library). */
export const NATIVE_ADDON_PATH =
  process.env.RLGATE_NATIVE_ADDON ||
  fileURLToPath(new URL("../../native/build/Release/rlgate_native.node", import.meta.url));

export interface NativeStatus {
  /** Whether the addon loaded. */
  loaded: boolean;
  /** Why not, when it did not (missing file, RLGATE_NATIVE=0, ABI mismatch). */
  error: string | null;
  path: string;
  /** rlgate_cuda.so next to the addon: absent (built without nvcc), loaded, or broken. */
  cudaLibrary: "absent" | "loaded" | "broken";
  cudaDevices: number;
  hardwareThreads: number;
  /**
   * Instruction set of the native CPU kernels: the CPU's best of AVX-512, AVX2 and the x86-64 baseline,
   * capped by RLGATE_SIMD=avx2|base (null without the addon).
   */
  simd: "avx512" | "avx2" | "base" | null;
}

function positiveIntFromEnv(name: string, fallback: number): number {
  const n = Number(process.env[name]);
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

function loadAddon(): { addon: NativeAddon | null; error: string | null } {
  if (process.env.RLGATE_NATIVE === "0") return { addon: null, error: "disabled by RLGATE_NATIVE=0" };
  try {
    const addon = createRequire(import.meta.url)(NATIVE_ADDON_PATH) as NativeAddon;
    const abi = addon.info().abi;
    if (abi !== NATIVE_ABI) {
      return { addon: null, error: `addon ABI ${abi}, expected ${NATIVE_ABI}: run npm run build:native` };
    }
    return { addon, error: null };
  } catch (err) {
    const message = err instanceof Error ? err.message.split("\n")[0] : String(err);
    return { addon: null, error: `${message} (run npm run build:native)` };
  }
}

const loaded = loadAddon();
const info = loaded.addon?.info();
const cudaDevices = loaded.addon && process.env.RLGATE_CUDA !== "0" ? loaded.addon.cudaDeviceCount() : 0;

export const nativeStatus: Readonly<NativeStatus> = Object.freeze({
  loaded: loaded.addon !== null,
  error: loaded.error,
  path: NATIVE_ADDON_PATH,
  cudaLibrary: (["absent", "loaded", "broken"] as const)[info?.cudaLibrary ?? 0] ?? "broken",
  cudaDevices,
  hardwareThreads: info?.hardwareThreads ?? 1,
  simd: info?.simd ?? null,
});

const asyncThreads = positiveIntFromEnv("RLGATE_THREADS", nativeStatus.hardwareThreads);

const cpuKernels = loaded.addon ? nativeKernels(loaded.addon, { device: "cpu", cudaMinTokens: 0, asyncThreads }) : null;
// Every token kernel on the GPU, whatever its size: what the CUDA tests and the bench compare.
const cudaOnlyKernels =
  loaded.addon && cudaDevices > 0
    ? nativeKernels(loaded.addon, { device: "cuda", cudaMinTokens: 0, asyncThreads })
    : null;

export const backend: Backend = cudaOnlyKernels ? "native-cuda" : cpuKernels ? "native-cpu" : "reference";

/** The active backend's kernels. */
export const kernels: Kernels =
  backend === "native-cuda" && loaded.addon
    ? nativeKernels(loaded.addon, {
        device: "cuda",
        cudaMinTokens: positiveIntFromEnv("RLGATE_CUDA_MIN_TOKENS", 1 << 18),
        asyncThreads,
      })
    : (cpuKernels ?? referenceKernels);

/**
 * A specific backend, or null where it is unavailable here: "reference" always; "native-cpu" when the
 * addon loaded; "native-cuda" (every token kernel on the GPU) when a CUDA device is visible.
 */
export function kernelsFor(which: Backend): Kernels | null {
  if (which === "reference") return referenceKernels;
  return which === "native-cpu" ? cpuKernels : cudaOnlyKernels;
}

export const {
  groupStats,
  groupStatsAsync,
  broadcastRows,
  broadcastRowsAsync,
  gatherTokens,
  gatherTokensAsync,
  rowCounts,
  rowCountsAsync,
  maskedGae,
  maskedGaeAsync,
  maskedWhiten,
  maskedWhitenAsync,
  treeNodeValues,
  treeNodeValuesAsync,
  importanceWeights,
  importanceWeightsAsync,
  klDivergence,
  klDivergenceAsync,
  lossWeights,
  lossWeightsAsync,
} = kernels;
