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
