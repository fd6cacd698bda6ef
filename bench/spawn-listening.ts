// A bench's server process (sim, forwarder, gateway) started through tsx, ready once it prints its URL.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";

export interface SpawnOptions {
  cwd: string;
  nodeArgs?: string[];
  /** The cores the process runs on (taskset -c; taskset execs node, so the pid is node's). */
  cores?: string;
  /** Hears the process exit after it was listening, with its last output (a server dying mid-run otherwise shows only
   *  as refused connections). */
  onExitAfterListening?: (message: string) => void;
}

export function spawnListening(
  args: string[],
  what: string,
  options: SpawnOptions,
): Promise<{ child: ChildProcess; url: string }> {
  const command = [process.execPath, ...(options.nodeArgs ?? []), "--import", "tsx", ...args];
  if (options.cores !== undefined) command.unshift("taskset", "-c", options.cores);
  const child = spawn(command[0]!, command.slice(1), {
    cwd: options.cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  return new Promise((resolve, reject) => {
    let out = "";
    let listening = false;
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/[^\s/]+)/.exec(out);
      if (match && !listening) {
        listening = true;
        resolve({ child, url: match[1]! });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    child.once("exit", (code, signal) => {
      const message = `${what} exited (${code ?? signal}): ${out.slice(-4000)}`;
      if (!listening) reject(new Error(message));
      else options.onExitAfterListening?.(message);
    });
  });
}

/** Keeps this process (the load generator), all its threads, on `cores` (taskset -a -cp). */
export function pinThisProcess(cores: string): void {
  const pinned = spawnSync("taskset", ["-a", "-cp", cores, String(process.pid)], { encoding: "utf8" });
  if (pinned.status !== 0) throw new Error(`taskset could not pin the load generator: ${pinned.stderr}`);
}
