// The call every gateway bench sends (an agent's first turn, 64 tokens at most) and the plain ways to send it: through
// a rollout created on the gateway, and N at a time on one connection with each answer read to its end.
import type { Pool } from "undici";

export const AGENT_BODY = {
  model: "Qwen/Qwen3-8B",
  messages: [
    { role: "system", content: "You are a coding agent." },
    { role: "user", content: "What is in this directory?" },
  ],
  max_tokens: 64,
};

/** An agent's request late in a session: system prompt, 20 tool round trips (~52 kB, ~17k prompt tokens). */
export function agentSizedBody(): typeof AGENT_BODY {
  const messages: Array<Record<string, unknown>> = [
    { role: "system", content: "You are a coding agent. ".repeat(150) },
  ];
  for (let t = 0; t < 20; t++) {
    messages.push({ role: "user", content: `Step ${t}: look at file src/module${t}.ts and fix the bug. `.repeat(10) });
    const call = {
      id: `call_${t}`,
      type: "function",
      function: { name: "shell", arguments: JSON.stringify({ command: `cat src/module${t}.ts` }) },
    };
    messages.push({ role: "assistant", content: "", tool_calls: [call] });
    messages.push({
      role: "tool",
      tool_call_id: call.id,
      content: `export function f${t}(x: number) {\n  return x * ${t} + 1;\n}\n`.repeat(25),
    });
  }
  return { ...AGENT_BODY, messages: messages as typeof AGENT_BODY.messages };
}

/** The chat completions path of a new rollout on the gateway at `url`. */
export async function rolloutChatPath(url: string): Promise<string> {
  const created = await fetch(`${url}/api/rollouts`, { method: "POST", body: "{}" });
  return `/r/${((await created.json()) as { id: string }).id}/v1/chat/completions`;
}

/** `count` calls one after another, each answer read whole; a status other than 200 ends the bench. */
export async function sendCalls(pool: Pool, path: string, body: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const res = await pool.request({ method: "POST", path, headers: { "content-type": "application/json" }, body });
    for await (const _chunk of res.body);
    if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
  }
}
