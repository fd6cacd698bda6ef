// Fixtures of the replica tests: several sims behind one gateway, and a tool-using agent whose turns can be played one
// at a time (so a test can kill a replica between two turns of a rollout).
import { rmSync } from "node:fs";
import { Writable } from "node:stream";
import { pino } from "pino";
import { startGateway, type Gateway, type GatewayOptions } from "../gateway/index.ts";
import { startSim, type SimOptions, type SimServer } from "../sim/index.ts";
import { createRollout, tempDir, TOOLS, type CreatedRollout } from "./helpers.ts";

export interface Fleet {
  sims: SimServer[];
  gateway: Gateway;
  /** The gateway's log lines (JSON objects), oldest first. */
  logs: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

export async function startSims(n: number, options: SimOptions = {}): Promise<SimServer[]> {
  return Promise.all(Array.from({ length: n }, () => startSim({ port: 0, ...options })));
}

/** `sims` behind one gateway (each listed in --upstream unless the options name the replicas otherwise). */
export async function startFleet(sims: SimServer[], options: Partial<GatewayOptions> = {}): Promise<Fleet> {
  const dataDir = tempDir("replicas");
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n")) if (line.trim()) logs.push(JSON.parse(line));
      done();
    },
  });
  const gateway = await startGateway({
    upstream: sims.map((s) => s.url),
    port: 0,
    dataDir,
    log: pino({ level: "info" }, sink),
    ...options,
  });
  return {
    sims,
    gateway,
    logs,
    async close() {
      await gateway.close();
      // A test may have closed a sim already; closing twice is harmless.
      await Promise.all(sims.map((s) => s.close().catch(() => {})));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A tool-using agent: each `turn()` sends its history and appends the reply and a tool result. */
export class Agent {
  readonly rollout: CreatedRollout;
  readonly messages: Array<Record<string, unknown>> = [
    { role: "system", content: "You are a coding agent." },
    { role: "user", content: "How many files are here?" },
  ];
  #turns = 0;

  private constructor(rollout: CreatedRollout) {
    this.rollout = rollout;
  }

  static async create(gatewayUrl: string): Promise<Agent> {
    return new Agent(await createRollout(gatewayUrl, { group: "replicas", harness: "test-agent" }));
  }

  /** One call; resolves with its HTTP status (the history grows only on a 200). */
  async turn(options: { stream?: boolean; headers?: Record<string, string> } = {}): Promise<number> {
    const res = await fetch(`${this.rollout.base_urls.openai}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...options.headers },
      body: JSON.stringify({ messages: this.messages, tools: TOOLS, stream: options.stream ?? false }),
    });
    let message: any;
    try {
      message = options.stream ? assemble(await res.text()) : ((await res.json()) as any).choices?.[0]?.message;
    } catch {
      return res.status === 200 ? 0 : res.status; // a body cut short: the harness saw a broken answer
    }
    if (res.status !== 200 || !message) return res.status;
    this.#turns++;
    this.messages.push({
      role: "assistant",
      content: message.tool_calls?.length ? null : (message.content ?? ""),
      ...(message.reasoning ? { reasoning: message.reasoning } : {}),
      ...(message.tool_calls?.length ? { tool_calls: message.tool_calls } : {}),
    });
    for (const call of message.tool_calls ?? [])
      this.messages.push({ role: "tool", tool_call_id: call.id, content: `out ${this.#turns}` });
    if (!message.tool_calls?.length) this.messages.push({ role: "user", content: `Go on (${this.#turns}).` });
    return 200;
  }
}

/** The assistant message of a streamed chat completion (content, reasoning, tool calls). */
function assemble(text: string): Record<string, unknown> | null {
  if (!text.includes("data: [DONE]")) throw new Error("stream ended early");
  let content = "";
  let reasoning = "";
  const calls: Array<{ id: string; type: string; function: { name: string; arguments: string } }> = [];
  for (const block of text.split("\n\n")) {
    if (!block.startsWith("data: ") || block === "data: [DONE]") continue;
    const delta = JSON.parse(block.slice(6)).choices?.[0]?.delta;
    if (!delta) continue;
    content += delta.content ?? "";
    reasoning += delta.reasoning ?? "";
    for (const call of delta.tool_calls ?? []) {
      const slot = (calls[call.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
      if (call.id) slot.id = call.id;
      slot.function.name += call.function?.name ?? "";
      slot.function.arguments += call.function?.arguments ?? "";
    }
  }
  return {
    content,
    ...(reasoning ? { reasoning: reasoning } : {}),
    ...(calls.length ? { tool_calls: calls } : {}),
  };
}
