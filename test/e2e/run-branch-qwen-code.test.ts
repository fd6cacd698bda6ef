// End to end: `rlgate run --branch` with the real Qwen Code CLI in bubblewrap sandboxes over the built-in sim.
// A deterministic task, in --prompts tokens with points at token positions (one at a call's first token: a whole
// call sampled anew; one inside a later call's answer): each branch's calls before its decision point are the
// backbone's answers (no upstream call, the same prompts), its decision call sees exactly the backbone's prompt ids
// followed by the answer's ids up to the position and samples on from there (its own seed), and the
// group (backbone + branches, one prefix tree) comes out of an RL core with tree advantages that an independent
// NumPy TreeRL recomputation (TREE_RL below) equals. A task whose tool prints random bytes: the branch's prompt
// differs before its point, and the divergence is handled as asked (drop: aborted, never
// graded; a branch sampling on after a divergence is covered at the gateway, test/branching.test.ts).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { startGateway, type Gateway } from "../../gateway/index.ts";
import { startCore, type Core } from "../../rl-core/core/index.ts";
import { branchSummary } from "../../runner/branch.ts";
import { resolveHarness } from "../../runner/harnesses.ts";
import type { RolloutResult } from "../../runner/rollout.ts";
import { runTasks, type RunOptions } from "../../runner/run.ts";
import { DEFAULT_LIMITS } from "../../runner/sandbox.ts";
import { loadTask, type Task } from "../../runner/task.ts";
import { startSim, type SimServer } from "../../sim/index.ts";
import type { CallRecord } from "../../store/records.ts";
import { trainerPython } from "../grpc-helpers.ts";
import { ROOT, rolloutCalls, tempDir, until } from "../helpers.ts";
import { rolloutDiagnosis, sandboxSkip } from "./runner-support.ts";

const execFileAsync = promisify(execFile);
const skip = sandboxSkip("qwen", join(ROOT, "node_modules", "@qwen-code", "qwen-code", "cli.js"));
const python = trainerPython();
if (!python && process.env.CI) throw new Error("CI must install python3-grpcio, python3-grpc-tools, python3-numpy");

/**
 * TreeRL over one batch of whole groups, in NumPy, independent of the core: a trie over each group's rows (a node per
 * distinct prefix, built in one pass: numpy_reference.py's prefix tuples are quadratic in a row's length, too slow
 * for Qwen Code's 15k-token prompts); V(n) = mean reward of the rollouts through n, each once; the branch parent is
 * the nearest ancestor with more rollouts (else the group's root, for a node not under every rollout); every trained
 * token of n gets ((V(n) - V(root)) + (V(n) - V(parent))) / sqrt(|rollouts(n)|). Prints the largest difference.
 */
const TREE_RL = `
import json, sys
import numpy as np
sys.path.insert(0, "clients/python")
from rlgate_client import TrainerClient
with TrainerClient(sys.argv[1]) as client:
    for batch in client.batches(trainer="treerl-reference", max_in_flight=1):
        client.ack([batch.batch_id])
        break
groups = {}
for r in range(batch.rows):
    i = batch.row_info[r]
    groups.setdefault((i.group, i.generation, i.late), []).append(r)
ref = np.zeros(batch.tokens)
for rows in groups.values():
    reward = {batch.row_info[r].rollout_id: batch.row_info[r].reward for r in rows}
    root = float(np.mean(list(reward.values())))
    child, parent, through, row_nodes = {}, [], [], []
    for r in rows:
        node, nodes = -1, []
        for tok in batch.token_ids[batch.row(r)].tolist():
            key = (node, tok)
            if key not in child:
                child[key] = len(parent)
                parent.append(node)
                through.append(set())
            node = child[key]
            through[node].add(batch.row_info[r].rollout_id)
            nodes.append(node)
        row_nodes.append(nodes)
    value = [float(np.mean([reward[x] for x in s])) for s in through]
    branch = []
    for n, p in enumerate(parent):
        if p < 0:
            branch.append(None)
        else:
            branch.append(p if len(through[p]) > len(through[n]) else branch[p])
    for r, nodes in zip(rows, row_nodes):
        s = batch.row(r)
        mask = batch.loss_mask[s]
        adv = np.zeros(len(nodes))
        for t, n in enumerate(nodes):
            if not mask[t]:
                continue
            b = branch[n]
            up = value[b] if b is not None else root
            adv[t] = ((value[n] - root) + (value[n] - up)) / np.sqrt(len(through[n]))
        ref[s] = adv
ref = ref.astype(np.float32).astype(np.float64)
trained = batch.loss_mask.astype(bool)
print(json.dumps({
    "rows": batch.rows,
    "rollouts": len({batch.row_info[r].rollout_id for r in range(batch.rows)}),
    "trained_tokens": int(trained.sum()),
    "nonzero": int(np.count_nonzero(ref[trained])),
    "max_abs_diff": float(np.max(np.abs(ref - batch.advantages))),
}))
`;

/** A task folder: the grader rewards every rollout but branch 1 (RLGATE_BRANCH), so the tree has signal. */
function writeTask(dir: string, name: string, prompt: string): Task {
  const root = join(dir, name);
  mkdirSync(join(root, "workspace"), { recursive: true });
  writeFileSync(join(root, "workspace", "notes.txt"), "branching notes\n");
  writeFileSync(join(root, "prompt.md"), `${prompt}\n`);
  writeFileSync(
    join(root, "task.json"),
    JSON.stringify({ verifier: 'test "$RLGATE_BRANCH" != 1', timeout: 120, verifier_timeout: 30 }),
  );
  return loadTask(root);
}

function runOptions(gateway: Gateway, task: Task, work: string): RunOptions {
  return {
    tasks: [task],
    harness: resolveHarness("qwen-code"),
    n: 1,
    concurrency: 2,
    timeoutSec: 120,
    gatewayUrl: gateway.url,
    limits: DEFAULT_LIMITS,
    workDir: work,
    env: { QWEN_CODE_NO_RELAUNCH: "1" },
  };
}

const byPosition = (calls: CallRecord[]) =>
  calls.filter((c) => c.status === "ok" && c.promptTokenIds !== null).sort((a, b) => a.seq - b.seq);

interface Run {
  sim: SimServer;
  gateway: Gateway;
  results: RolloutResult[];
  dirs: Record<string, string>;
}

async function closeRun(run: Run | undefined): Promise<void> {
  await run?.gateway.close();
  await run?.sim.close();
  for (const d of Object.values(run?.dirs ?? {})) rmSync(d, { recursive: true, force: true });
}

/** Call 0 at its first token (the whole call), and call 1 three tokens into its answer. */
const TOKEN_POINTS = [
  { call: 0, token: 0 },
  { call: 1, token: 3 },
];

/** The deterministic task: the sim's own policy (a shell call, then an answer), its wording drawn from the seed. */
async function deterministicRun(): Promise<Run> {
  const dirs = { data: tempDir("branch-e2e-store"), core: tempDir("branch-e2e-core"), work: tempDir("branch-e2e") };
  chmodSync(dirs.work, 0o755);
  const sim = await startSim({ port: 0, seed: 11 });
  const gateway = await startGateway({
    upstream: sim.url,
    port: 0,
    grpcPort: 0,
    dataDir: dirs.data,
    prompts: "tokens",
  });
  const task = writeTask(dirs.work, "say-notes", "Run a command, then say what it printed.");
  const results = await runTasks({
    ...runOptions(gateway, task, dirs.work),
    // Seeds under which the sim's wording at both points differs from the backbone's (it draws one of four).
    branching: { k: 2, at: { kind: "tokens", points: TOKEN_POINTS }, onDivergence: "sample", seed: 1 },
  });
  return { sim, gateway, results, dirs };
}

/** The task whose first tool prints random bytes, branched after it with --on-divergence drop. */
async function divergenceRun(): Promise<Run> {
  const dirs = { data: tempDir("branch-div-store"), work: tempDir("branch-div") };
  chmodSync(dirs.work, 0o755);
  const shell = (command: string) => ({ name: "run_shell_command", arguments: { command, description: command } });
  const sim = await startSim({
    port: 0,
    // Qwen Code's first request already holds an assistant turn (its context acknowledgement): turn 0 is never played.
    script: [
      { content: "unused" },
      { reasoning: "Draw some bytes.", tool_calls: [shell("od -An -N8 -tx1 /dev/urandom")] },
      { reasoning: "Read the notes.", tool_calls: [shell("cat notes.txt")] },
      { reasoning: "Done.", content: "Done." },
    ],
  });
  const gateway = await startGateway({ upstream: sim.url, port: 0, dataDir: dirs.data });
  const task = writeTask(dirs.work, "random-tool", "Draw random bytes, then read notes.txt.");
  const results = await runTasks({
    ...runOptions(gateway, task, dirs.work),
    branching: { k: 1, at: { kind: "calls", calls: [2] }, onDivergence: "drop" },
  });
  return { sim, gateway, results, dirs };
}

// Both runs start together (their sandboxes overlap: Qwen Code waits more than it computes); each suite awaits its own.
let runs: { deterministic: Promise<Run>; divergence: Promise<Run> } | null = null;
function startRuns(): NonNullable<typeof runs> {
  if (!runs) {
    runs = { deterministic: deterministicRun(), divergence: divergenceRun() };
    for (const run of Object.values(runs)) run.catch(() => undefined); // reported by the suite that awaits it
  }
  return runs;
}

describe("rlgate run --branch: Qwen Code, a deterministic task, tree advantages", { skip }, () => {
  let run: Run;
  let sim: SimServer;
  let gateway: Gateway;
  let results: RolloutResult[];
  let dirs: Record<string, string>;

  before(async () => {
    run = await startRuns().deterministic;
    ({ sim, gateway, results, dirs } = run);
  });
  after(() => closeRun(run));

  test("each branch replays exactly up to its point (no upstream call, prompts equal) and samples anew there", async (t) => {
    assert.equal(results.length, 3);
    const backbone = results.find((r) => !r.branch)!;
    assert.equal(backbone.status, "ok", await rolloutDiagnosis(gateway.url, backbone));
    const base = byPosition(await rolloutCalls(gateway.url, backbone.rolloutId!));
    assert.ok(base.length >= 2, `qwen made its calls: ${base.length}`);
    const branches = results.filter((r) => r.branch);
    assert.deepEqual(
      branches.map((r) => ({ call: r.branch!.atCall, token: r.branch!.atToken })),
      TOKEN_POINTS,
    );
    let upstreamCalls = base.length;
    for (const r of branches) {
      assert.equal(r.status, "ok", await rolloutDiagnosis(gateway.url, r));
      assert.equal(r.reward, r.branch!.index === 1 ? 0 : 1);
      const at = r.branch!.atCall;
      const calls = byPosition(await rolloutCalls(gateway.url, r.rolloutId!));
      for (let i = 0; i < at; i++) {
        assert.equal(calls[i]!.replayOf?.seq, base[i]!.seq, `call ${i} answered from the backbone`);
        assert.equal(calls[i]!.requestForwarded, null, "never sent upstream");
        assert.deepEqual(calls[i]!.requestReceived, base[i]!.requestReceived, "the harness asked the same");
      }
      const point = calls[at]!;
      const kept = base[at]!.choices[0]!.tokenIds.slice(0, r.branch!.atToken);
      assert.equal(point.replayOf, undefined);
      assert.deepEqual(
        point.promptTokenIds,
        [...base[at]!.promptTokenIds!, ...kept],
        "the decision call saw the backbone's prompt and its answer's ids up to the position",
      );
      assert.notDeepEqual(
        point.choices[0]!.tokenIds,
        base[at]!.choices[0]!.tokenIds.slice(kept.length),
        "and sampled anew from there",
      );
      const cost = r.branch!.cost!;
      assert.equal(cost.replayedCalls, at);
      assert.equal(cost.divergence, null);
      assert.ok(cost.sampledTokens > 0 && cost.backboneSampledTokens > 0);
      upstreamCalls += cost.sampledCalls;
    }
    const served = sim.requests.filter((q) => q.path === "/v1/completions").length;
    assert.equal(served, upstreamCalls, "the sim served the backbone's calls and the branches' own only");
    t.diagnostic(branchSummary(results));
  });

  test(
    "one group, one tree: the core's tree advantages equal a NumPy TreeRL recomputation",
    { skip: python ? false : "no python3 with grpc and numpy" },
    async () => {
      const core: Core = await startCore({
        gateways: [gateway.grpc!.address],
        port: 0,
        metricsPort: null,
        dataDir: dirs.core!,
        estimator: "tree",
        batchUnit: "group",
        tokenBudget: 1_000_000,
        batchTimeoutMs: 200,
        groupTimeoutMs: 60_000,
      });
      try {
        await until(() => (core.status().groupsDone >= 1 ? true : undefined), 60_000, "the group");
        await core.flush();
        const { stdout } = await execFileAsync(python!, ["-c", TREE_RL, core.address], {
          cwd: ROOT,
          timeout: 120_000,
        });
        const ref = JSON.parse(stdout);
        assert.equal(ref.rollouts, 3, `backbone and branches in one batch: ${stdout}`);
        assert.ok(ref.nonzero > 0, `advantages with signal: ${stdout}`);
        assert.ok(ref.max_abs_diff < 1e-5, stdout);
      } finally {
        await core.close();
      }
    },
  );
});

describe("rlgate run --branch --on-divergence drop: a tool that prints random bytes", { skip }, () => {
  let run: Run;
  let sim: SimServer;
  let gateway: Gateway;
  let results: RolloutResult[];

  before(async () => {
    run = await startRuns().divergence;
    ({ sim, gateway, results } = run);
  });
  after(() => closeRun(run));

  test("the branch's second prompt differs from the backbone's: divergence recorded, the branch dropped", async () => {
    const [backbone, branch] = results;
    assert.equal(backbone!.status, "ok", await rolloutDiagnosis(gateway.url, backbone!));
    assert.equal(byPosition(await rolloutCalls(gateway.url, backbone!.rolloutId!)).length, 3);
    assert.equal(branch!.status, "aborted", await rolloutDiagnosis(gateway.url, branch!));
    assert.equal(branch!.reward, null, "never graded, never trained");
    assert.match(branch!.error!, /diverged from its backbone before its decision point \(call 1/);
    const cost = branch!.branch!.cost!;
    assert.deepEqual(cost.divergence?.at, 1);
    assert.equal(cost.divergence?.action, "drop");
    assert.equal(cost.replayedCalls, 1, "the first call (same prompt) was answered from the backbone");
    assert.equal(cost.sampledCalls, 0, "nothing went upstream for it");
    const served = sim.requests.filter((q) => q.path === "/v1/chat/completions").length;
    assert.equal(served, 3, "only the backbone's calls reached the sim");
  });
});
