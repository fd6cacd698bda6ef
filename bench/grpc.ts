// npm run bench:grpc [-- --rows 64 --tokens 8192 --batches 40 --in-flight 4 --repeat 3]
//
// Token payload (offsets, ids, masks, logprobs, advantages, loss weights: 17 B a token) from an RL core's
// trainer service to a trainer over loopback gRPC, in MB/s, side by side:
//   raw TCP      the same bytes over a plain loopback socket, Node to Node (the ceiling of this machine)
//   node         clients/ts TrainerClient in its own process: batches() stream, typed-array views, acks pipelined
//   python       clients/python TrainerClient (grpcio + numpy.frombuffer), /usr/bin/python3, acks pipelined
// Each client runs in its own process, as a trainer does; the first batch (connecting) is not timed.
// Each measurement runs --repeat times (interleaved) and the best is shown with the range: loopback figures on a
// shared machine are noisy. CPU ms per batch (this server process, the client process) is the steadier figure.
// Batches are synthetic (seeded), served by the real TrainerService from memory so that only the link is timed.
// Targets (design.md): >= 200 MB/s to Node, >= 100 MB/s to Python. Never gates CI.
import { execFile } from "node:child_process";
import { createServer, connect } from "node:net";
import { parseArgs } from "node:util";
import { Server } from "@grpc/grpc-js";
import { buildBatch } from "../rl-core/core/batch-packer.ts";
import type { ReadyRow, StoredBatch } from "../rl-core/core/core-store.ts";
import type { BatchSource } from "../rl-core/core/served-batches.ts";
import { TrainerService } from "../rl-core/core/trainer-service.ts";
import { bindServer, bytesOf, serverOptions, trainerService, type CoreStatus } from "../protocol/index.ts";

const { values: args } = parseArgs({
  options: {
    rows: { type: "string", default: "64" },
    tokens: { type: "string", default: "8192" },
    batches: { type: "string", default: "40" },
    "in-flight": { type: "string", default: "4" },
    repeat: { type: "string", default: "3" },
  },
});
const ROWS = Number(args.rows);
const TOKENS = Number(args.tokens);
const BATCHES = Number(args.batches);
const IN_FLIGHT = Number(args["in-flight"]);
const REPEAT = Math.max(1, Number(args.repeat));
const MB = 1e6;

function seededRows(): ReadyRow[] {
  let s = 12345;
  const next = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0);
  return Array.from({ length: ROWS }, (_, r) => ({
    rolloutId: `r${r}`,
    trajectoryId: `r${r}:0`,
    groupKey: `group:g${r >> 3}`,
    group: `g${r >> 3}`,
    task: "t",
    harness: "h",
    reward: r % 2,
    segment: "main",
    generation: 1,
    late: false,
    signal: "ok" as const,
    context: { rollouts: [], rewards: [], tokens: [] },
    calls: [{ seq: r, policyVersion: "1", finishReason: "stop" }],
    callIndex: bytesOf(Int32Array.from({ length: TOKENS }, (_, i) => (i % 3 ? 0 : -1))),
    finishReason: "stop",
    policyVersion: "1",
    tokenIds: bytesOf(Int32Array.from({ length: TOKENS }, () => next() % 151_000)),
    lossMask: bytesOf(Uint8Array.from({ length: TOKENS }, (_, i) => (i % 3 ? 1 : 0))),
    logprobs: bytesOf(Float32Array.from({ length: TOKENS }, () => -(next() % 1000) / 200)),
    advantages: bytesOf(Float32Array.from({ length: TOKENS }, () => (next() % 200) / 100 - 1)),
  }));
}

/** One batch served again and again under fresh ids. */
class RepeatingSource implements BatchSource {
  readonly #batch: StoredBatch;
  #next = 1;
  readonly #live = new Set<number>();
  constructor(batch: StoredBatch) {
    this.#batch = batch;
  }
  get size() {
    return this.#live.size;
  }
  next(exclude: ReadonlySet<number>): number | null {
    for (const id of this.#live) if (!exclude.has(id)) return id;
    const id = this.#next++;
    this.#live.add(id);
    return id;
  }
  get(id: number): StoredBatch | undefined {
    return this.#live.has(id) ? { ...this.#batch, batchId: id } : undefined;
  }
  async remove(ids: readonly number[]): Promise<number> {
    let n = 0;
    for (const id of ids) if (this.#live.delete(id)) n++;
    return n;
  }
}

const payloadBytes = (b: StoredBatch) =>
  b.offsets.byteLength +
  b.tokenIds.byteLength +
  b.lossMask.byteLength +
  b.logprobs.byteLength +
  b.advantages.byteLength +
  b.lossWeights.byteLength;

async function rawTcp(bytes: number, rounds: number): Promise<number> {
  const chunk = Buffer.alloc(bytes, 7);
  return new Promise((resolve) => {
    const server = createServer((socket) => {
      let got = 0;
      let start = 0;
      socket.on("data", (d) => {
        if (start === 0) start = performance.now();
        got += d.length;
        if (got >= bytes * rounds) {
          const seconds = (performance.now() - start) / 1000;
          socket.end();
          server.close();
          resolve((bytes * rounds) / MB / seconds);
        }
      });
    });
    server.listen(0, "127.0.0.1", async () => {
      const socket = connect((server.address() as { port: number }).port, "127.0.0.1");
      for (let i = 0; i < rounds; i++) if (!socket.write(chunk)) await new Promise((r) => socket.once("drain", r));
    });
  });
}

interface Run {
  mbps: number | null;
  note: string;
  /** CPU ms per batch: this (server) process, the client process. */
  serverCpu: number;
  clientCpu: number;
  copied: number;
}

/** A client process reads the batches (asynchronously: the server lives in this process and keeps serving). */
function clientProcess(command: string, args: string[]): Promise<Run> {
  const cpu = process.cpuUsage();
  return new Promise((resolve) => {
    execFile(
      command,
      [...args, address, String(BATCHES + 1), String(IN_FLIGHT)],
      { encoding: "utf8" },
      (error, stdout, stderr) => {
        const used = process.cpuUsage(cpu);
        const serverCpu = (used.user + used.system) / 1000 / (BATCHES + 1);
        if (error)
          return resolve({
            mbps: null,
            note: (stderr || error.message).trim().split("\n").at(-1) ?? "",
            serverCpu,
            clientCpu: 0,
            copied: 0,
          });
        const out = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
          bytes: number;
          seconds: number;
          cpuSeconds: number;
          copied?: number;
        };
        resolve({
          mbps: out.bytes / MB / out.seconds,
          note: "",
          serverCpu,
          clientCpu: (out.cpuSeconds * 1000) / BATCHES,
          copied: out.copied ?? 0,
        });
      },
    );
  });
}

const rows = seededRows();
const batch = await buildBatch(1, rows, { normalize: "none", lossAgg: "token-mean", estimator: "grpo" });
const perBatch = payloadBytes(batch);
const service: TrainerService = new TrainerService({
  source: new RepeatingSource(batch),
  token: null,
  status: (): CoreStatus => ({
    estimator: "grpo",
    rolloutsReceived: 0,
    rolloutsDuplicate: 0,
    groupsPending: 0,
    groupsDone: 0,
    trajectoriesReady: 0,
    batchesReady: 0,
    batchesLeased: service.leased,
    gateways: [],
    gatewaysConnected: [],
    rolloutsLate: 0,
    rolloutsDropped: {},
    batchUnit: "rollout",
    whitenScope: "batch",
    currentVersion: "",
    maxStaleness: -1,
    stale: "keep",
    staleTokensKept: 0,
    staleTokensMasked: 0,
  }),
});
const server = new Server(serverOptions());
server.addService(trainerService, service.handlers());
const port = await bindServer(server, "127.0.0.1", 0);
const address = `127.0.0.1:${port}`;

console.log(
  `bench:grpc — ${BATCHES} batches of ${ROWS} rows × ${TOKENS} tokens = ${(perBatch / MB).toFixed(1)} MB of token payload each, ${IN_FLIGHT} in flight, loopback`,
);
// `node --cpu-prof --import tsx bench/grpc.ts` profiles the Node client process too.
const profiling = process.execArgv.filter((a) => a.startsWith("--cpu-prof"));
const runs: { raw: number[]; node: Run[]; python: Run[] } = { raw: [], node: [], python: [] };
for (let i = 0; i < REPEAT; i++) {
  runs.raw.push(await rawTcp(perBatch, BATCHES));
  runs.node.push(await clientProcess(process.execPath, [...profiling, "--import", "tsx", "bench/grpc-node-client.ts"]));
  runs.python.push(
    await clientProcess(process.env.RLGATE_PYTHON ?? "/usr/bin/python3", ["bench/grpc-python-client.py"]),
  );
}
server.forceShutdown();

const raw = Math.max(...runs.raw);
const range = (values: number[]) =>
  values.length > 1 ? `   (${Math.min(...values).toFixed(0)}–${Math.max(...values).toFixed(0)})` : "";
const line = (name: string, rs: Run[] | null, target: number | null) => {
  const ok = rs?.filter((r) => r.mbps !== null) ?? [];
  const best = rs === null ? { mbps: raw } : ok.sort((a, b) => b.mbps! - a.mbps!)[0];
  const mbps = best?.mbps ?? null;
  const values = rs === null ? runs.raw : ok.map((r) => r.mbps!);
  console.log(
    `  ${name.padEnd(8)} ${mbps === null ? "       n/a" : `${mbps.toFixed(0).padStart(6)} MB/s`}` +
      (mbps === null ? "" : `${range(values).padEnd(14)} ${(mbps / raw).toFixed(2)}× raw TCP`) +
      (target === null || mbps === null
        ? ""
        : `   ${(mbps / target).toFixed(2)}× target ${target} MB/s ${mbps >= target ? "✓" : "✗"}`) +
      (best && "serverCpu" in best
        ? `   CPU/batch: server ${best.serverCpu.toFixed(1)} ms, client ${best.clientCpu.toFixed(1)} ms`
        : "") +
      (best && "copied" in best && best.copied ? `, ${best.copied} arrays copied to align` : "") +
      (rs && ok.length < rs.length ? `   (${rs.find((r) => r.mbps === null)!.note})` : ""),
  );
};
line("raw TCP", null, null);
line("node", runs.node, 200);
line("python", runs.python, 100);
