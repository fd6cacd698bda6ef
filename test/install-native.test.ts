// `npm install` runs scripts/install-native.mjs: the addon is built where a C++ compiler exists; without one, or
// when the build fails, the install succeeds with the TypeScript kernels and says so loudly (unless
// RLGATE_REQUIRE_NATIVE=1, as in CI, where it fails). Run here against a copy of the package, so the checkout's
// built addon is never touched.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { findCompiler, upToDate } from "../scripts/install-native.mjs";
import { ROOT, tempDir } from "./helpers.ts";

let copy: string;
before(() => {
  copy = tempDir("install-native");
  cpSync(join(ROOT, "package.json"), join(copy, "package.json"));
  cpSync(join(ROOT, "scripts"), join(copy, "scripts"), { recursive: true });
  mkdirSync(join(copy, "native"));
  for (const part of ["binding.gyp", "src", "cuda"])
    cpSync(join(ROOT, "native", part), join(copy, "native", part), { recursive: true });
  symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"));
});
after(() => rmSync(copy, { recursive: true, force: true }));

function install(env: Record<string, string | undefined>) {
  return spawnSync(process.execPath, ["scripts/install-native.mjs"], {
    cwd: copy,
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: 300_000,
  });
}

describe("npm install's native build", () => {
  test("no C++ compiler: the install succeeds, loudly, with the reference kernels; RLGATE_REQUIRE_NATIVE=1 fails it", () => {
    const noCompiler = { PATH: "/nonexistent", CXX: undefined }; // the script runs by node's full path
    const soft = install({ ...noCompiler, RLGATE_REQUIRE_NATIVE: undefined });
    assert.equal(soft.status, 0, soft.stderr);
    assert.match(
      soft.stderr,
      /the native kernels were NOT built: no C\+\+ compiler found \(c\+\+, g\+\+, clang\+\+ on PATH\)/,
    );
    assert.match(soft.stderr, /rlgate works, with the TypeScript reference kernels/);
    assert.match(soft.stderr, /npx rlgate doctor/);
    const strict = install({ ...noCompiler, RLGATE_REQUIRE_NATIVE: "1" });
    assert.equal(strict.status, 1);
    assert.match(strict.stderr, /RLGATE_REQUIRE_NATIVE=1: the install fails/);
  });

  test("a compiler that fails: the build's error is shown, the install still succeeds, nothing half-built is loaded", () => {
    const run = install({ CXX: "false", RLGATE_CUDA: "0", RLGATE_REQUIRE_NATIVE: undefined });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stderr, /gyp ERR!/);
    assert.match(run.stderr, /the native kernels were NOT built: npm run build:native failed \(exit 1\) with \S*false/);
    assert.equal(existsSync(join(copy, "native/build/Release/rlgate_native.node")), false);
  });

  test("an addon newer than its sources is kept as it is (every npm install runs the script); a changed source rebuilds", () => {
    const release = join(copy, "native/build/Release");
    mkdirSync(release, { recursive: true });
    const addon = join(release, "rlgate_native.node");
    writeFileSync(addon, "stands in for a built addon");
    const later = new Date(Date.now() + 60_000);
    utimesSync(addon, later, later);
    assert.equal(upToDate(copy), true);
    const run = install({ CXX: "false", RLGATE_REQUIRE_NATIVE: "1" }); // a build would fail: none is tried
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stderr, /native kernels up to date, not rebuilt/);
    const source = join(copy, "native/src/kernels.cc");
    utimesSync(source, new Date(Date.now() + 120_000), new Date(Date.now() + 120_000));
    assert.equal(upToDate(copy), false);
    rmSync(join(copy, "native/build"), { recursive: true, force: true });
  });

  test("the compiler is $CXX when set, else c++ / g++ / clang++ from PATH", () => {
    const bin = tempDir("fake-cxx");
    writeFileSync(join(bin, "clang++"), "#!/bin/sh\n", { mode: 0o755 });
    assert.equal(findCompiler({ PATH: bin }), join(bin, "clang++"));
    assert.equal(findCompiler({ PATH: "/nonexistent" }), null);
    assert.equal(findCompiler({ PATH: bin, CXX: "/nonexistent/g++ -m64" }), null);
    rmSync(bin, { recursive: true, force: true });
  });
});
