// Shared fixtures for integration tests: a simulated vLLM and a gateway on loopback ports, torn down afterwards.
import { connect } from "node:net";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startGateway, type Gateway, type GatewayOptions } from "../gateway/index.ts";
import { startSim, type SimOptions, type SimServer } from "../sim/index.ts";
import type { CallRecord } from "../store/records.ts";
import { fromSnakeCase } from "../util/json-case.ts";

export const ROOT = new URL("..", import.meta.url).pathname;

export interface Stack {
  sim: SimServer;
  gateway: Gateway;
  dataDir: string;
  close(): Promise<void>;
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `rlgate-${prefix}-`));
}

export async function startStack(
  options: { sim?: SimOptions; gateway?: Partial<GatewayOptions> } = {},
): Promise<Stack> {
  const sim = await startSim({ port: 0, ...options.sim });
  const dataDir = tempDir("store");
  const gateway = await startGateway({ upstream: sim.url, port: 0, dataDir, ...options.gateway });
  const stack: Stack = {
    sim,
    gateway,
    dataDir,
    async close() {
      // A test may have replaced the gateway (a restart on the same store): close the current one.
      await stack.gateway.close();
      await stack.sim.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return stack;
}

export interface CreatedRollout {
  id: string;
  key: string;
  base_urls: { openai: string; anthropic: string };
}

export async function createRollout(gatewayUrl: string, body: Record<string, unknown> = {}): Promise<CreatedRollout> {
  const res = await fetch(`${gatewayUrl}/api/rollouts`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`create rollout: ${res.status} ${await res.text()}`);
  return (await res.json()) as CreatedRollout;
}

/** A rollout's calls as records (the API's snake_case read back, as rlgate show reads them). */
export async function rolloutCalls(gatewayUrl: string, rolloutId: string): Promise<CallRecord[]> {
  const res = await fetch(`${gatewayUrl}/api/rollouts/${rolloutId}/calls`);
  if (res.status !== 200) throw new Error(`calls: ${res.status} ${await res.text()}`);
  return fromSnakeCase<{ calls: CallRecord[] }>(await res.json()).calls;
}

export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: any; text: string }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** Reads an SSE response to the end and returns the parsed `data:` payloads (the final `[DONE]` as a string). */
export async function readSse(res: Response): Promise<unknown[]> {
  const text = await res.text();
  const events: unknown[] = [];
  for (const block of text.split("\n\n")) {
    const data = block
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(line.charCodeAt(5) === 32 ? 6 : 5))
      .join("\n");
    if (!data) continue;
    events.push(data === "[DONE]" ? data : JSON.parse(data));
  }
  return events;
}

/**
 * The assistant message a streamed chat answer's deltas add up to (its first choice): content and reasoning stay null
 * when no delta carried them; reasoning is read under `field`, or under either of vLLM's names when none is given.
 */
export function streamedMessage(
  events: readonly unknown[],
  field?: "reasoning" | "reasoning_content",
): { content: string | null; reasoning: string | null; tool_calls: Array<Record<string, any>> } {
  const message = { content: null as string | null, reasoning: null as string | null, tool_calls: [] as any[] };
  for (const event of events) {
    if (typeof event === "string") continue;
    const delta = (event as Record<string, any>).choices?.[0]?.delta;
    if (!delta) continue;
    if (typeof delta.content === "string") message.content = (message.content ?? "") + delta.content;
    const reasoning = field ? delta[field] : (delta.reasoning ?? delta.reasoning_content);
    if (typeof reasoning === "string") message.reasoning = (message.reasoning ?? "") + reasoning;
    for (const call of delta.tool_calls ?? []) {
      const entry = (message.tool_calls[call.index] ??= {
        id: call.id,
        type: "function",
        function: { name: "", arguments: "" },
      });
      if (call.function?.name) entry.function.name = call.function.name;
      if (call.function?.arguments) entry.function.arguments += call.function.arguments;
    }
  }
  return message;
}

export const TOOLS = [
  {
    type: "function",
    function: {
      name: "run_shell_command",
      description: "Run a shell command",
      parameters: {
        type: "object",
        properties: { command: { type: "string", description: "the command" } },
        required: ["command"],
      },
    },
  },
];

/** Polls `probe` until it returns a value (not undefined), or throws after `timeoutMs`. */
export async function until<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 20_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface CliProcess {
  child: ChildProcess;
  output: () => string;
  /** Resolves once stdout or stderr has matched. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** `rlgate …` as a child process (through tsx), output collected. */
export function spawnCli(args: string[], env: Record<string, string> = {}): CliProcess {
  const child = spawn(process.execPath, ["--import", "tsx", "cli/index.ts", ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let text = "";
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    text += chunk.toString();
    for (const l of [...listeners]) l();
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    child,
    output: () => text,
    waitFor(pattern, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = text.match(pattern);
          if (!m) return;
          cleanup();
          resolve(m);
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`timed out waiting for ${pattern} in:\n${text}`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
    async kill(signal = "SIGKILL") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** `rlgate …` run to its end (through tsx): its exit code and output, also when it fails. */
export async function runCli(
  args: string[],
  timeoutMs = 120_000,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { execFile } = await import("node:child_process");
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "cli/index.ts", ...args],
      { cwd: ROOT, encoding: "utf8", timeout: timeoutMs },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== "number") return reject(error);
        resolve({ code: error ? (error.code as number) : 0, stdout, stderr });
      },
    );
  });
}

/** Plays a tool-using agent through a base URL: sends its history, appends the reply (reasoning kept or not) and a tool result. */
export async function playAgent(
  baseUrl: string,
  turns: number,
  keepReasoning: boolean,
  headers: Record<string, string> = {},
): Promise<void> {
  const messages: Array<Record<string, unknown>> = [
    { role: "system", content: "You are a coding agent." },
    { role: "user", content: "How many files are here?" },
  ];
  for (let turn = 0; turn < turns; turn++) {
    const res = await fetch(`${baseUrl}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ messages, tools: TOOLS }),
    });
    if (res.status !== 200) throw new Error(`chat: ${res.status} ${await res.text()}`);
    const message = ((await res.json()) as any).choices[0].message;
    const back: Record<string, unknown> = {
      role: "assistant",
      content: message.tool_calls?.length ? null : message.content,
    };
    if (keepReasoning && message.reasoning) back["reasoning"] = message.reasoning;
    if (message.tool_calls?.length) back["tool_calls"] = message.tool_calls;
    messages.push(back);
    for (const call of message.tool_calls ?? [])
      messages.push({ role: "tool", tool_call_id: call.id, content: `out ${turn}` });
  }
}

export const AGENT_SCRIPT = [
  { reasoning: "Look at the files.", tool_calls: [{ name: "run_shell_command", arguments: { command: "ls" } }] },
  { reasoning: "Count them.", tool_calls: [{ name: "run_shell_command", arguments: { command: "ls | wc -l" } }] },
  { reasoning: "Done.", content: "There are 2 files." },
];

/** Reads server-sent events (event name and JSON data) from a response until `until` says enough, or the timeout. */
export async function collectSse(
  res: Response,
  until: (events: Array<{ event: string; data: any }>) => boolean,
  timeoutMs = 30_000,
) {
  const events: Array<{ event: string; data: any }> = [];
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const deadline = setTimeout(() => reader.cancel(), timeoutMs);
  let buffer = "";
  try {
    while (!until(events)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event && data) events.push({ event, data: JSON.parse(data) });
      }
    }
  } finally {
    clearTimeout(deadline);
    await reader.cancel().catch(() => {});
  }
  return events;
}

/** Sends raw bytes on a fresh socket and resolves with everything the gateway answered. */
export function rawRequest(url: string, bytes: string | Buffer): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.end(bytes));
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")));
  });
}
