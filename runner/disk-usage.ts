// What a folder tree takes on disk, measured without blocking the event loop: the watchdog of a sandbox whose disk
// quota cannot be a filesystem of its own (runner/sandbox-disk.ts, method "watch").
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";

/** Bytes the folders take on disk (du; what cannot be read is not counted). */
export function diskUsage(dirs: string[]): Promise<number> {
  return new Promise((resolve) => {
    const du = spawn("du", ["-s", "-B1", "-x", "-c", ...dirs.filter((d) => existsSync(d))], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    let out = "";
    du.stdout.on("data", (d: Buffer) => (out += d));
    du.on("error", () => resolve(0));
    du.on("close", () => {
      const total = /^(\d+)\s+total$/m.exec(out);
      resolve(total ? Number(total[1]) : 0);
    });
  });
}
