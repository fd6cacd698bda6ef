// The CUDA GAE kernel's logic, checked on machines without a GPU: native/cuda/gae_emulation.cc runs the kernel's
// source (native/cuda/gae_kernel.cuh) on the CPU, a std::thread per CUDA thread, and compares it with the CPU
// kernel. The GPU itself (memory model, speed) is checked by cuda.test.ts and native/cuda/gpu-check.sh on a GPU.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

const root = new URL("../..", import.meta.url).pathname;
const cxx = process.env.CXX ?? "g++";

test("the CUDA GAE kernel, emulated on the CPU, equals the CPU kernel (token and row rewards, context tails, gamma*lambda > 1)", (t) => {
  if (spawnSync(cxx, ["--version"]).status !== 0) return t.skip(`no C++ compiler (${cxx}) to build the emulation`);
  const dir = mkdtempSync(join(tmpdir(), "rlgate-gae-emulation-"));
  try {
    const binary = join(dir, "gae_emulation");
    const sources = ["native/cuda/gae_emulation.cc", "native/src/kernels.cc", "native/src/cuda_loader.cc"];
    const flags = ["-O2", "-std=c++20", "-fopenmp-simd", "-Wno-psabi"];
    const build = spawnSync(cxx, [...flags, ...sources, "-ldl", "-lpthread", "-o", binary], { cwd: root, encoding: "utf8" });
    assert.equal(build.status, 0, `building the emulation failed:\n${build.stderr}`);
    const run = spawnSync(binary, { encoding: "utf8", timeout: 120_000 });
    assert.equal(run.status, 0, `the emulated CUDA kernel differs from the CPU kernel:\n${run.stdout}${run.stderr}`);
    assert.match(run.stdout, / 0 differ from the CPU kernel/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
