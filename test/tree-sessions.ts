// Harness sessions whose calls share most of their tokens, driven through a gateway (and whatever upstream it has):
// the patterns that make rows cost many times a rollout's unique tokens, used by the tree layout's tests and
// `npm run bench:tree`.
// - moving: an internal-context user message placed last in every request and gone from there in the next (as
//   OpenClaw does), so every call leaves a trajectory of its own;
// - compaction: a thread restarted from a summary the model wrote, under the same system prompt;
// - continued: a session resumed from its saved history without the model's reasoning, then carried on;
// - branching: a backbone and branches of it at its calls (the gateway replays the backbone before each point).
import { createRollout, postJson } from "./helpers.ts";

type Message = Record<string, unknown>;

export const SESSION_KINDS = ["moving", "compaction", "continued", "branching"] as const;
export type SessionKind = (typeof SESSION_KINDS)[number];

const SYSTEM =
  "You are a personal assistant running inside a gateway. Keep answers short. Use what the workspace context says.";

async function chat(baseUrl: string, messages: Message[]): Promise<Message> {
  const res = await postJson(`${baseUrl}/chat/completions`, { messages, max_tokens: 48 });
  if (res.status !== 200) throw new Error(`chat: ${res.status} ${res.text}`);
  const m = res.json.choices[0].message;
  const back: Message = { role: "assistant", content: m.content ?? "" };
  if (m.reasoning) back["reasoning"] = m.reasoning;
  return back;
}

/** Turns of a plain agent conversation appended to `history`; `moving` adds the trailing context message. */
async function turns(baseUrl: string, history: Message[], from: number, count: number, moving = false) {
  for (let t = from; t < from + count; t++) {
    const context = { role: "user", content: `<workspace-context>turn ${t}: ${t + 2} files open</workspace-context>` };
    const answer = await chat(baseUrl, moving ? [...history, context] : history);
    history.push(answer, { role: "user", content: `Result of step ${t}: done. Next step.` });
  }
  return history;
}

function start(task: string): Message[] {
  return [
    { role: "system", content: SYSTEM },
    { role: "user", content: task },
  ];
}

/** One session of `kind` in rollout `baseUrl` (branching: use branchingGroup). */
export async function playSession(baseUrl: string, kind: Exclude<SessionKind, "branching">, size: number) {
  if (kind === "moving") {
    await turns(baseUrl, start("Tidy the notes folder."), 0, size, true);
  } else if (kind === "compaction") {
    const history = await turns(baseUrl, start("Summarise the inbox."), 0, size);
    const summary = history.filter((m) => m["role"] === "assistant").at(-1)!["content"] as string;
    await turns(baseUrl, start(`Summary of the conversation so far: ${summary}\nGo on.`), size, size);
  } else {
    const history = await turns(baseUrl, start("Fix the failing test."), 0, size);
    // Resumed from what the harness saved: its messages without the model's reasoning, then carried on.
    const saved = history.map(({ reasoning: _r, ...m }) => m);
    saved.push({ role: "user", content: "Continue where you left off." });
    await turns(baseUrl, saved, size, size);
  }
}

export interface PlayedGroup {
  group: string;
  kind: SessionKind;
  rollouts: string[];
}

/** A group of `n` rollouts of one session kind (branching: a backbone and n - 1 branches at its calls). */
export async function playGroup(
  gatewayUrl: string,
  kind: SessionKind,
  group: string,
  n: number,
  size: number,
): Promise<PlayedGroup> {
  const rollouts: string[] = [];
  const finish = async (id: string, i: number) => {
    const res = await postJson(`${gatewayUrl}/api/rollouts/${id}/finish`, { reward: (i * 0.37) % 1 });
    if (res.status !== 200) throw new Error(`finish: ${res.status} ${res.text}`);
  };
  const meta = { group, task: group, harness: `tree-${kind}`, metadata: { group_size: n } };
  for (let i = 0; i < n; i++) {
    const body = kind === "branching" && i > 0 ? { ...meta, branch: { of: rollouts[0], at_call: i % size } } : meta;
    const r = await createRollout(gatewayUrl, body);
    if (kind === "branching") await turns(r.base_urls.openai, start("Plan the trip."), 0, size);
    else await playSession(r.base_urls.openai, kind, size);
    rollouts.push(r.id);
    await finish(r.id, i);
  }
  return { group, kind, rollouts };
}
