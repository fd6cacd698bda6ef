#!/usr/bin/env node
// Launches the TypeScript CLI through tsx, so `rlgate` works from a checkout and from an npm install alike.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
// The RL core allocates batch-sized buffers (tens of MB) again and again: with glibc's defaults each comes from a
// fresh mmap and its first touch page-faults 4 KiB at a time (measured: ~60 ms of faults for a 21 MB estimator
// output, 30x the kernel itself; half the CPU of a gRPC batch send). These tunables keep such buffers in the heap
// for reuse and back them with transparent huge pages where the kernel allows (docs/rl-core.md, protocol section).
// A GLIBC_TUNABLES the user set wins; other commands run with glibc's defaults.
const CORE_MALLOC_TUNABLES =
  "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=2147483648";
const env =
  process.argv[2] === "core" && !process.env.GLIBC_TUNABLES
    ? { ...process.env, GLIBC_TUNABLES: CORE_MALLOC_TUNABLES }
    : process.env;
const child = spawn(process.execPath, ["--import", tsx, join(root, "cli", "index.ts"), ...process.argv.slice(2)], {
  stdio: "inherit",
  env,
});
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal));
// `npx rlgate` runs this launcher under `sh -c`, and a SIGTERM to npx ends that shell without passing the signal on:
// the launcher is orphaned (re-parented) and the CLI would keep its port. Whoever started us going away stops it too.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) child.kill("SIGTERM");
}, 500).unref();
child.on("exit", (code, signal) => {
  if (signal) process.kill(process.pid, signal);
  else process.exit(code ?? 1);
});
