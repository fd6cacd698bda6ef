// Fixtures for the gRPC link's tests: synthetic agent rollouts written straight into a gateway's store, a
// gateway without an upstream, and CLI processes that can be killed.
import { spawnSync } from "node:child_process";
import { freePort } from "../util/listen.ts";
import { startGateway, type Gateway, type GatewayOptions } from "../gateway/index.ts";
import type { CallRecord, RolloutRecord, RolloutStatus } from "../store/records.ts";
import type { Store } from "../store/store.ts";
import { testCallRecord } from "../store/test-support.ts";
import { spawnCli, tempDir, type CliProcess } from "./helpers.ts";

/** A gateway with its gRPC trajectory stream on a free port; no upstream is contacted by these tests. */
export function startGrpcGateway(options: Partial<GatewayOptions> = {}): Promise<Gateway> {
  return startGateway({
    upstream: "http://127.0.0.1:9",
    port: 0,
    grpcPort: 0,
    dataDir: tempDir("grpc-gw"),
    ...options,
  });
}

/** Deterministic pseudo-random ints. */
export function lcg(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0);
}

export interface SyntheticRollout {
  id: string;
  group?: string | null;
  task?: string | null;
  harness?: string | null;
  metadata?: Record<string, unknown>;
  reward: number | null;
  status?: Exclude<RolloutStatus, "open">;
  /** Agent turns: each call's prompt is the previous prompt + completion + a tool result. */
  turns?: number;
  promptTokens?: number;
  sampledTokens?: number;
  seed?: number;
}

/** The calls of an agent that sends its history back faithfully: one trajectory. */
export function agentCalls(
  rolloutId: string,
  seqStart: number,
  opts: Required<Pick<SyntheticRollout, "turns" | "promptTokens" | "sampledTokens" | "seed">>,
): CallRecord[] {
  const next = lcg(opts.seed);
  const token = () => 1000 + (next() % 100_000);
  let prompt = Array.from({ length: opts.promptTokens }, token);
  const calls: CallRecord[] = [];
  for (let turn = 0; turn < opts.turns; turn++) {
    const sampled = Array.from({ length: opts.sampledTokens }, token);
    const now = Date.now();
    calls.push(
      testCallRecord({
        seq: seqStart + turn,
        rolloutId,
        promptTokenIds: prompt,
        choices: [
          { index: 0, tokenIds: sampled, logprobs: sampled.map((t) => -((t % 97) + 1) / 50), finishReason: "stop" },
        ],
        timings: { start: now, upstreamStart: now, firstByte: now, firstToken: now, end: now, overheadMs: 0 },
      }),
    );
    prompt = [...prompt, ...sampled, ...Array.from({ length: 8 }, token)];
  }
  return calls;
}

/** Writes a finished rollout (its record and calls) into a gateway's store; returns its cursor. */
export async function putSyntheticRollout(store: Store, r: SyntheticRollout): Promise<number> {
  const record: RolloutRecord = {
    id: r.id,
    key: `rk_${r.id}`,
    group: r.group ?? null,
    task: r.task ?? null,
    harness: r.harness ?? "synthetic",
    metadata: r.metadata ?? {},
    status: "open",
    reward: null,
    createdAt: Date.now(),
    finishedAt: null,
  };
  await store.putRollout(record);
  const calls = agentCalls(r.id, store.nextCallSeq(), {
    turns: r.turns ?? 2,
    promptTokens: r.promptTokens ?? 32,
    sampledTokens: r.sampledTokens ?? 16,
    seed: r.seed ?? [...r.id].reduce((h, c) => Math.imul(h ^ c.charCodeAt(0), 16777619), 2166136261),
  });
  for (const call of calls) {
    call.seq = store.nextCallSeq();
    await store.putCall(call);
  }
  return store.finishRollout({ ...record, status: r.status ?? "ok", reward: r.reward, finishedAt: Date.now() });
}

/**
 * A `rlgate serve` process (sim upstream) on fixed ports and data directory, so a test can kill it and start it again
 * where it was: `start()` resolves once its trajectory stream listens; every process started is added to `procs`.
 */
export async function restartableGateway(
  dataDir: string,
  procs: CliProcess[],
): Promise<{ url: string; grpcPort: number; start: () => Promise<CliProcess> }> {
  const [httpPort, grpcPort] = [await freePort(), await freePort()];
  const start = async () => {
    const p = spawnCli([
      "serve",
      "--upstream",
      "sim",
      "--port",
      String(httpPort),
      "--grpc-port",
      String(grpcPort),
      "--data",
      dataDir,
    ]);
    procs.push(p);
    await p.waitFor(/trajectories:\s+grpc:/, 60_000);
    return p;
  };
  return { url: `http://127.0.0.1:${httpPort}`, grpcPort, start };
}

/** Debian's Python with grpcio and numpy (RLGATE_PYTHON overrides); null when it lacks them. */
export function trainerPython(): string | null {
  const python = process.env.RLGATE_PYTHON ?? "/usr/bin/python3";
  const probe = spawnSync(python, ["-c", "import grpc, grpc_tools, numpy"], { encoding: "utf8" });
  return probe.status === 0 ? python : null;
}
