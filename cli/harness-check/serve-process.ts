// An `rlgate serve` of its own for each scripted session, started as a child process with the serve options given
// (passed through as they are: `--prompts tokens`, `--no-repair-history`, …), so a session sees exactly the gateway a
// user starts with those options.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const START_TIMEOUT_MS = 180_000;

export interface ServeProcess {
  url: string;
  stop(): Promise<void>;
}

export async function startServe(serveArgs: readonly string[]): Promise<ServeProcess> {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "cli/index.ts", "serve", ...serveArgs], {
    cwd: ROOT,
    env: process.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  let output = "";
  const url = await new Promise<string | null>((resolve) => {
    const timer = setTimeout(() => resolve(null), START_TIMEOUT_MS);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const m = /listening on (http:\/\/\S+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    void exited.then(() => {
      clearTimeout(timer);
      resolve(null);
    });
  });
  if (url === null) {
    await stop();
    throw new Error(`rlgate serve ${serveArgs.join(" ")} did not start:\n${output.slice(-2000)}`);
  }
  // Its log goes nowhere from now on, but is read so that a full pipe never blocks it.
  child.stdout!.resume();
  child.stderr!.resume();
  return { url, stop };
}
