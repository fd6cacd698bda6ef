#!/usr/bin/env node
// Launches the TypeScript CLI through tsx, so `rlgate` works from a checkout and from an npm install alike.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const child = spawn(process.execPath, ["--import", tsx, join(root, "cli", "index.ts"), ...process.argv.slice(2)], {
  stdio: "inherit",
});
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => {
  if (signal) process.kill(process.pid, signal);
  else process.exit(code ?? 1);
});
