// A bench's server process (sim, forwarder, gateway) started through tsx, ready once it prints its URL.
import { spawn, type ChildProcess } from "node:child_process";

export function spawnListening(
  args: string[],
  what: string,
  options: { cwd: string; nodeArgs?: string[] },
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), "--import", "tsx", ...args], {
    cwd: options.cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  return new Promise((resolve, reject) => {
    let out = "";
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/[^\s/]+)/.exec(out);
      if (match) resolve({ child, url: match[1]! });
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
    child.once("exit", (code, signal) => reject(new Error(`${what} exited (${code ?? signal}): ${out.slice(-2000)}`)));
  });
}
