// The CUDA kernels and their host code, checked on machines without a GPU: native/cuda/kernels.cu is compiled as
// C++ against a CPU emulation of the CUDA it uses (native/cuda/emulation.h) into an rlgate_cuda.so, and
// native/cuda/cuda_check (the GPU check's comparison of every CUDA kernel with the CPU kernels) runs against it, and
// so do the CUDA, kernel and estimator test files, through a copy of the addon (RLGATE_NATIVE_ADDON) next to it.
// This tests the kernels' logic (indexing, tiling, the GAE scan's chunks, block reductions); the device itself
// (memory model, speed) is checked by cuda.test.ts and native/cuda/gpu-check.sh where a GPU is.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { nativeStatus } from "./index.ts";

const root = new URL("../..", import.meta.url).pathname;
const cxx = process.env.CXX ?? "g++";
const haveCompiler = spawnSync(cxx, ["--version"]).status === 0;

function compile(args: string[]): void {
  const r = spawnSync(cxx, ["-std=c++17", "-O1", "-Wno-psabi", ...args], { cwd: root, encoding: "utf8" });
  assert.equal(r.status, 0, `${cxx} ${args.join(" ")} failed:\n${r.stderr}`);
}

describe(
  "CUDA kernels, emulated on the CPU, against the CPU kernels",
  { skip: haveCompiler ? false : `no C++ compiler (${cxx})` },
  () => {
    let dir = "";
    before(() => {
      dir = mkdtempSync(join(tmpdir(), "rlgate-cuda-emulation-"));
      // The loader finds rlgate_cuda.so next to the binary that contains it, as it finds it next to the addon.
      compile([
        "-x",
        "c++",
        "-DRLG_CUDA_EMULATION",
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",
        "native/cuda/kernels.cu",
        "-o",
        join(dir, "rlgate_cuda.so"),
      ]);
      compile([
        "-fopenmp-simd",
        "native/cuda/cuda_check.cc",
        "native/src/kernels.cc",
        "native/src/cuda_loader.cc",
        "-ldl",
        "-lpthread",
        "-o",
        join(dir, "cuda_check"),
      ]);
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    const check = (env: Record<string, string>) => {
      const r = spawnSync(join(dir, "cuda_check"), {
        encoding: "utf8",
        timeout: 120_000,
        env: { ...process.env, RLGATE_CHECK_NO_BENCH: "1", ...env },
      });
      assert.equal(r.status, 0, `cuda_check:\n${r.stdout}${r.stderr}`);
      assert.match(r.stdout, /CUDA library: loaded, devices: 1/);
      assert.match(r.stdout, /ok: CUDA kernels equal the CPU kernels/);
    };

    test("every kernel on ragged batches, a 300k-token row, empty rows and no tokens; bad indices; gamma * lambda > 1", () =>
      check({}));

    test("row-tiled kernels when a row has more tiles than the grid has slots (rows of 268M+ tokens on a GPU)", () =>
      check({ RLGATE_CUDA_MAX_TILE_SLOTS: "3" }));

    test("the addon's CUDA path: the CUDA and kernel tests and the estimators, on a copy of the addon next to the emulated library", (t) => {
      if (!nativeStatus.loaded || !existsSync(nativeStatus.path)) {
        if (process.env.RLGATE_REQUIRE_NATIVE === "1")
          assert.fail(`the addon is not built (${nativeStatus.error}) (RLGATE_REQUIRE_NATIVE=1)`);
        return t.skip(`the addon is not built (${nativeStatus.error})`);
      }
      copyFileSync(nativeStatus.path, join(dir, "rlgate_native.node"));
      const files = [
        "rl-core/kernels/cuda.test.ts",
        "rl-core/kernels/kernels.test.ts",
        "rl-core/estimators/estimators.test.ts",
      ];
      const r = spawnSync(process.execPath, ["--import", "tsx", "--test", "--test-reporter=tap", ...files], {
        cwd: root,
        encoding: "utf8",
        timeout: 300_000,
        env: {
          ...process.env,
          NODE_TEST_CONTEXT: undefined,
          RLGATE_NATIVE: undefined,
          RLGATE_CUDA: undefined,
          RLGATE_NATIVE_ADDON: join(dir, "rlgate_native.node"),
          RLGATE_REQUIRE_CUDA: "1",
        },
      });
      assert.equal(
        r.status,
        0,
        `the tests failed on the emulated CUDA library:\n${r.stdout.slice(-6000)}${r.stderr.slice(-3000)}`,
      );
      assert.match(r.stdout, /CUDA kernels vs the TypeScript reference/);
      assert.match(r.stdout, /kernels \(native-cuda\)/, "the kernel tests ran on the CUDA backend");
      assert.match(r.stdout, /# fail 0/);
    });
  },
);
