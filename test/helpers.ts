// Shared fixtures for integration tests: a simulated vLLM and a gateway on loopback ports, torn down afterwards.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startGateway, type Gateway, type GatewayOptions } from "../gateway/index.ts";
import { startSim, type SimOptions, type SimServer } from "../sim/index.ts";
import type { CallRecord } from "../store/records.ts";

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

export async function rolloutCalls(gatewayUrl: string, rolloutId: string): Promise<CallRecord[]> {
  const res = await fetch(`${gatewayUrl}/api/rollouts/${rolloutId}/calls`);
  if (res.status !== 200) throw new Error(`calls: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { calls: CallRecord[] }).calls;
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
