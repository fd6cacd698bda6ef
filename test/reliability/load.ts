// The load the reliability checks put on a gateway process: clients that each drive rollouts (create, calls — half of
// them streamed — then finish with a reward), and remember what the gateway acknowledged: calls whose response they
// read to its proper end, and finishes answered 200. Shared by the kill test and the soak.
import type { CliProcess } from "../helpers.ts";
import { spawnCli } from "../helpers.ts";

export interface Acknowledged {
  /** Call number (x-rlgate-call) → its rollout, for every call a client saw complete. */
  calls: Map<number, string>;
  /** Rollouts whose finish was answered 200. */
  finishes: Set<string>;
  /** Every rollout created. */
  rollouts: Set<string>;
  /** Answers with a 5xx status: what was asked, the status and the start of the body. */
  serverErrors: string[];
}

export function newAcknowledged(): Acknowledged {
  return { calls: new Map(), finishes: new Set(), rollouts: new Set(), serverErrors: [] };
}

/** Keeps a 5xx answer: a gateway killed under load cuts connections, it never answers 5xx. */
async function noteServerError(ack: Acknowledged, what: string, res: Response, text?: string): Promise<void> {
  if (res.status < 500) return;
  const body = text ?? (await res.text().catch(() => ""));
  ack.serverErrors.push(`${what}: ${res.status} ${body.slice(0, 400)}`);
}

export async function spawnGateway(
  upstream: string,
  dataDir: string,
  extra: string[] = [],
): Promise<{ proc: CliProcess; url: string }> {
  const proc = spawnCli([
    "serve",
    "--upstream",
    upstream,
    "--port",
    "0",
    "--grpc-port",
    "0",
    "--data",
    dataDir,
    ...extra,
  ]);
  const match = await proc.waitFor(/listening on (http:\/\/\S+)/, 120_000); // a loaded machine starts tsx slowly
  return { proc, url: match[1]! };
}

const JSON_HEADERS = { "content-type": "application/json" };

/**
 * A request unanswered this long is given up (not acknowledged): a connection some fault leaves open costs the load
 * this wait, not undici's 300 s headers timeout (test/serve-workers.test.ts checks that none is left open).
 */
const CALL_TIMEOUT_MS = 60_000;

/**
 * One client: rollouts of `callsPerRollout` calls each, until `stop()` says so. Errors (the gateway killed under it)
 * end nothing: what was cut is simply not acknowledged.
 */
export async function client(
  url: () => string,
  index: number,
  ack: Acknowledged,
  stop: () => boolean,
  callsPerRollout = 6,
): Promise<void> {
  for (let r = 0; !stop(); r++) {
    let id: string;
    try {
      const res = await fetch(`${url()}/api/rollouts`, {
        method: "POST",
        headers: JSON_HEADERS,
        body: JSON.stringify({ group: `c${index}` }),
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
      if (res.status !== 201) {
        await noteServerError(ack, "create a rollout", res);
        continue;
      }
      id = ((await res.json()) as { id: string }).id;
      ack.rollouts.add(id);
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 20));
      continue;
    }
    for (let i = 0; i < callsPerRollout && !stop(); i++) {
      const stream = (index + i) % 2 === 0;
      try {
        const res = await fetch(`${url()}/r/${id}/v1/chat/completions`, {
          method: "POST",
          headers: JSON_HEADERS,
          body: JSON.stringify({
            messages: [{ role: "user", content: `client ${index} rollout ${r} call ${i}` }],
            stream,
            max_tokens: 24,
          }),
          signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
        });
        const seq = Number(res.headers.get("x-rlgate-call"));
        const text = await res.text();
        await noteServerError(ack, `call ${seq} of ${id}`, res, text);
        // Complete means: a 200 whose body the harness read to its proper end.
        if (res.status === 200 && (!stream || text.trimEnd().endsWith("data: [DONE]"))) ack.calls.set(seq, id);
      } catch {
        // cut by a kill: not acknowledged
      }
    }
    if (stop()) return;
    try {
      const res = await fetch(`${url()}/api/rollouts/${id}/finish`, {
        method: "POST",
        headers: JSON_HEADERS,
        body: '{"reward":1}',
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
      const text = await res.text();
      await noteServerError(ack, `finish ${id}`, res, text);
      if (res.status === 200) ack.finishes.add(id);
    } catch {
      // cut by a kill
    }
  }
}

export interface Verified {
  /** Acknowledged calls missing from the store. */
  lostCalls: number[];
  /** Acknowledged calls stored but not as `ok` with tokens. */
  brokenCalls: number[];
  /** Acknowledged finishes whose rollout is open again (or gone). */
  lostFinishes: string[];
  /** Rollouts with acknowledged calls whose calls could not be listed: why (their calls are not counted as lost). */
  unlisted: string[];
}

/** Reads back, from a (restarted) gateway, everything that was acknowledged. */
export async function verify(url: string, ack: Acknowledged): Promise<Verified> {
  const byRollout = new Map<string, number[]>();
  for (const [seq, rollout] of ack.calls) byRollout.set(rollout, [...(byRollout.get(rollout) ?? []), seq]);
  const out: Verified = { lostCalls: [], brokenCalls: [], lostFinishes: [], unlisted: [] };
  for (const [rollout, seqs] of byRollout) {
    const res = await fetch(`${url}/api/rollouts/${rollout}/calls`);
    if (res.status !== 200) {
      out.unlisted.push(`${rollout} (calls ${seqs.join(", ")}): HTTP ${res.status} ${await res.text()}`);
      continue;
    }
    const calls = (
      (await res.json()) as {
        calls: Array<{
          seq: number;
          status: string;
          prompt_token_ids: number[] | null;
          choices: Array<{ token_ids: number[] }>;
        }>;
      }
    ).calls;
    const stored = new Map(calls.map((c) => [c.seq, c]));
    for (const seq of seqs) {
      const call = stored.get(seq);
      if (!call) out.lostCalls.push(seq);
      else if (call.status !== "ok" || !call.prompt_token_ids?.length || !call.choices[0]?.token_ids.length)
        out.brokenCalls.push(seq);
    }
  }
  for (const id of ack.finishes) {
    const res = await fetch(`${url}/api/rollouts/${id}`);
    const status = res.status === 200 ? ((await res.json()) as { status: string }).status : "missing";
    if (status === "open" || status === "missing") out.lostFinishes.push(id);
  }
  return out;
}
