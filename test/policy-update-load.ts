// Weight updates under load, shared by the bounded test (test/policy-update.test.ts) and the full figure
// (bench/policy-updates.ts): `rollouts` agents call on (streamed chat, tokens mode) until `updates` updates have landed,
// each on answers in flight, in abort, wait and keep mode by turn; then the figures the issue asks for are read back
// from what the harnesses received and what the gateway recorded, and each sampled token's recorded version is checked
// against the version whose weights sampled it (token-version-check.ts). Nothing here asserts: the caller does, or
// prints.
import type { Stack } from "./helpers.ts";
import { createRollout, rolloutCalls } from "./helpers.ts";
import { versionMismatches } from "./token-version-check.ts";

export const UPDATE_MODES = ["abort", "wait", "keep"] as const;
export type UpdateMode = (typeof UPDATE_MODES)[number];

export interface LoadOptions {
  updates: number;
  rollouts: number;
  /** The sim's seed (its logprobs noise-free): what tells which version sampled each token. */
  simSeed: number;
  /** Tokens per answer; default 40. */
  maxTokens?: number;
  /** One update: pause in `mode`, then resume with `version` (the gateway's HTTP API, or a trainer's gRPC). */
  update(mode: UpdateMode, version: string): Promise<void>;
}

export interface LoadFigures {
  updates: number;
  rollouts: number;
  calls: number;
  /** Calls the gateway recorded with a status other than ok. */
  failed: number;
  /** Harness calls that did not end with exactly one finish reason, or whose request failed. */
  lost: number;
  /** Finish reasons `abort` a harness received. */
  abortsSeen: number;
  /** Sampled tokens without a version. */
  untagged: number;
  /** Sampled tokens whose recorded version is not the one that sampled them (token-version-check.ts). */
  mismatched: number;
  /** Sampled tokens recorded with a version other than the rollout's first ("0"): the check met updates. */
  updatedTokens: number;
  sampledTokens: number;
  continued: number;
  /** Per call held by a pause: ms. */
  heldMs: number[];
  wallMs: number;
}

async function streamChat(url: string, body: unknown): Promise<string[]> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const finishes: string[] = [];
  let buffer = "";
  const decoder = new TextDecoder();
  for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(bytes, { stream: true });
    for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
      const data = buffer.slice(0, end).replace(/^data: /, "");
      buffer = buffer.slice(end + 2);
      if (data === "[DONE]") continue;
      const reason = JSON.parse(data).choices?.[0]?.finish_reason;
      if (reason) finishes.push(reason);
    }
  }
  return finishes;
}

export async function policyUpdateLoad(stack: Stack, options: LoadOptions): Promise<LoadFigures> {
  const started = Date.now();
  const url = stack.gateway.url;
  let updates = 0;
  let lost = 0;
  let abortsSeen = 0;
  const rollouts = await Promise.all(
    Array.from({ length: options.rollouts }, () => createRollout(url, { policy_version: "0" })),
  );
  // Each rollout calls on until the updater is done, then once more: the run ends by itself.
  const agents = rollouts.map(async (rollout, r) => {
    for (let turn = 0; updates < options.updates || turn === 0; turn++) {
      const body = {
        model: "Qwen/Qwen3-8B",
        stream: true,
        seed: 7,
        max_tokens: options.maxTokens ?? 40,
        messages: [{ role: "user", content: `rollout ${r} turn ${turn}` }],
      };
      const finishes = await streamChat(`${url}/r/${rollout.id}/v1/chat/completions`, body).catch(() => null);
      if (finishes?.length !== 1) lost++;
      abortsSeen += finishes?.filter((f) => f === "abort").length ?? 0;
    }
  });
  const updater = (async () => {
    for (let i = 1; i <= options.updates; i++) {
      // Each update waits for some generation to be running, so it lands on answers in flight.
      while (stack.sim.stats.inFlight === 0) await new Promise((r) => setImmediate(r));
      await options.update(UPDATE_MODES[i % UPDATE_MODES.length]!, String(i));
      updates = i;
    }
  })();
  await Promise.all([updater, ...agents]);
  const wallMs = Date.now() - started;

  const calls = (await Promise.all(rollouts.map((r) => rolloutCalls(url, r.id)))).flat();
  let untagged = 0;
  let mismatched = 0;
  let updatedTokens = 0;
  let sampledTokens = 0;
  let continued = 0;
  const heldMs: number[] = [];
  for (const call of calls) {
    const tokens = call.choices[0]?.tokenIds.length ?? 0;
    sampledTokens += tokens;
    const runs = call.policyUpdate?.versions ?? [{ start: 0, version: call.policyVersion ?? null }];
    if (runs[0]!.start !== 0) untagged += Math.min(tokens, runs[0]!.start);
    runs.forEach((run, k) => {
      if (run.version === null) untagged += Math.min(tokens, runs[k + 1]?.start ?? tokens) - run.start;
    });
    const check = versionMismatches(call, options.simSeed);
    mismatched += check.mismatched;
    updatedTokens += check.updated;
    continued += call.policyUpdate?.continued ?? 0;
    if (call.policyUpdate?.heldMs !== undefined) heldMs.push(call.policyUpdate.heldMs);
  }
  return {
    updates: options.updates,
    rollouts: options.rollouts,
    calls: calls.length,
    failed: calls.filter((c) => c.status !== "ok").length,
    lost,
    abortsSeen,
    untagged,
    mismatched,
    updatedTokens,
    sampledTokens,
    continued,
    heldMs,
    wallMs,
  };
}

/** The figures in one line: what the issue asks for (0 lost or failed, every token's version right, held per call). */
export function describeLoad(f: LoadFigures): string {
  const held = [...f.heldMs].sort((a, b) => a - b);
  const at = (q: number) => (held.length ? held[Math.min(held.length - 1, Math.floor(q * held.length))]! : 0);
  const mean = held.length ? held.reduce((a, b) => a + b, 0) / held.length : 0;
  return (
    `${f.updates} updates under ${f.rollouts} concurrent rollouts in ${(f.wallMs / 1000).toFixed(1)} s: ` +
    `${f.calls} calls, ${f.lost} lost, ${f.failed} failed, ${f.abortsSeen} aborts seen by a harness, ` +
    `${f.continued} answers continued; of ${f.sampledTokens} sampled tokens ${f.untagged} without a version, ` +
    `${f.mismatched} with a version other than the one that sampled them (${f.updatedTokens} sampled after an update); ` +
    `${held.length} calls held: mean ${mean.toFixed(1)} ms, p50 ${at(0.5).toFixed(1)}, p99 ${at(0.99).toFixed(1)}, ` +
    `max ${(held.at(-1) ?? 0).toFixed(1)} ms`
  );
}
