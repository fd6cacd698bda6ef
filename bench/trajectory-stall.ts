// bench:trajectory-stall — what finishing and delivering long rollouts costs the gateway's event loop (the loop that
// relays harness calls), with the work on the main thread (as before the trajectory worker) and on the worker, in
// one run. Each rollout: 100 turns whose prompts grow to ~95k tokens. Per rollout: the finish summary, the
// trajectories JSON and the gRPC stream message. Also: decoding the rollout's calls as whole records (`listCalls`)
// against decoding only their tokens with shared prompts (`listCallTokens`).
//
//   npm run bench:trajectory-stall [-- --rollouts 4 --turns 100]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { rolloutMessage } from "../gateway/grpc/rollout-message.ts";
import { reconstructStored } from "../gateway/trajectories.ts";
import { TrajectoryThread } from "../gateway/trajectory-thread.ts";
import { encodeStreamMessage } from "../protocol/proto.ts";
import type { RolloutRecord } from "../store/records.ts";
import { Store } from "../store/store.ts";
import { testCallRecord, testRolloutRecord } from "../store/test-support.ts";
import { reconstructionToJson } from "../trajectory/index.ts";
import { PromptIndex } from "../trajectory/prompt-index.ts";

const { values: args } = parseArgs({
  options: { rollouts: { type: "string", default: "4" }, turns: { type: "string", default: "100" } },
});
const ROLLOUTS = Number(args.rollouts);
const TURNS = Number(args.turns);
const MAX_MESSAGE = 512 << 20;

async function longRollout(store: Store, id: string): Promise<RolloutRecord> {
  const open = testRolloutRecord({ id, key: `k-${id}` });
  await store.putRollout(open);
  let prompt = Array.from({ length: 1500 }, (_, i) => 1000 + (i % 5000));
  for (let t = 0; t < TURNS; t++) {
    const sampled = Array.from({ length: 300 }, (_, i) => 2000 + ((t * 31 + i) % 9000));
    const choices = [{ index: 0, tokenIds: sampled, logprobs: sampled.map(() => -0.5), finishReason: "stop" }];
    await store.putCall(testCallRecord({ rolloutId: id, seq: store.nextCallSeq(), promptTokenIds: prompt, choices }));
    prompt = [...prompt, ...sampled, ...Array.from({ length: 640 }, (_, i) => 3000 + ((t * 7 + i) % 7000))];
  }
  const finished: RolloutRecord = { ...open, status: "ok", reward: 1, finishedAt: 2 };
  await store.finishRollout(finished);
  return finished;
}

/** Runs `work` while sampling the event loop's delay every millisecond; the longest stall and the wall time. */
async function stalls(work: () => Promise<void>): Promise<{ maxMs: number; p99Ms: number; wallMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const start = performance.now();
  await work();
  const wallMs = performance.now() - start;
  await new Promise((r) => setTimeout(r, 5));
  h.disable();
  return { maxMs: h.max / 1e6, p99Ms: h.percentile(99) / 1e6, wallMs };
}

const dir = mkdtempSync(join(tmpdir(), "rlgate-bench-stall-"));
const store = new Store({ path: dir, promptIndex: new PromptIndex() });
const thread = new TrajectoryThread(dir, {});
try {
  const rollouts: RolloutRecord[] = [];
  for (let r = 0; r < ROLLOUTS; r++) rollouts.push(await longRollout(store, `r${r}`));
  await thread.ready();
  const yieldTurn = () => new Promise((r) => setImmediate(r));
  // Warm both paths once (JIT), then measure.
  reconstructStored(store, rollouts[0]!, {});
  await thread.summary(rollouts[0]!);
  const main = await stalls(async () => {
    for (const [i, rollout] of rollouts.entries()) {
      // As the gateway did before the worker: each of the three rebuilt the rollout on the event loop.
      reconstructStored(store, rollout, {}); // the finish summary's stats and flags
      await yieldTurn();
      Buffer.from(JSON.stringify(reconstructionToJson(reconstructStored(store, rollout, {}))));
      await yieldTurn();
      encodeStreamMessage({
        rollout: rolloutMessage(reconstructStored(store, rollout, {}), i + 1, rollout, MAX_MESSAGE),
      });
      await yieldTurn();
    }
  });
  const worker = await stalls(async () => {
    for (const [i, rollout] of rollouts.entries()) {
      await thread.summary(rollout);
      await thread.json(rollout);
      await thread.message(i + 1, rollout, MAX_MESSAGE);
    }
  });
  const time = (f: () => unknown) => {
    const start = performance.now();
    f();
    return performance.now() - start;
  };
  const records = Math.min(...[0, 1, 2].map(() => time(() => store.listCalls(rollouts[0]!.id))));
  const tokens = Math.min(...[0, 1, 2].map(() => time(() => store.listCallTokens(rollouts[0]!.id))));

  console.log(
    `bench:trajectory-stall — ${ROLLOUTS} rollouts of ${TURNS} turns (prompts up to ~${((1500 + TURNS * 940) / 1000).toFixed(0)}k tokens); per rollout: finish summary, trajectories JSON, stream message\n`,
  );
  console.log("where the work runs      longest stall   p99 stall    wall time   (event loop of the gateway, ms)");
  const row = (name: string, r: { maxMs: number; p99Ms: number; wallMs: number }) =>
    console.log(
      `${name.padEnd(22)} ${r.maxMs.toFixed(1).padStart(13)} ${r.p99Ms.toFixed(1).padStart(11)} ${r.wallMs.toFixed(0).padStart(12)}`,
    );
  row("main thread (before)", main);
  row("trajectory worker", worker);
  console.log(`longest stall: ${(main.maxMs / worker.maxMs).toFixed(0)}x shorter on the worker\n`);
  console.log(
    `decoding one rollout's calls: whole records (listCalls) ${records.toFixed(1)} ms, tokens with shared prompts (listCallTokens) ${tokens.toFixed(1)} ms: ${(records / tokens).toFixed(0)}x`,
  );
} finally {
  await thread.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
