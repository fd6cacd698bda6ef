// The tree layout (`rlgate core --layout tree`) on real batches: sessions that share most of their tokens (a context
// message moved to the end of every request as OpenClaw does, a compaction, a continued session, a branching group)
// driven through the gateway and the simulated vLLM into three cores (GRPO with seq-mean-token-mean, REINFORCE++
// with token-mean, tree with seq-mean-token-sum-norm). Each batch is read in both layouts from the same core: the
// tree holds every distinct (prefix, token) of a rollout's rows once, its rows come back exactly, the loss weights
// sum the same, reports in either layout agree. Then clients/python/tests/test_tree_layout.py reads the same
// batches through the Python client and checks the PyTorch trainer's loss and gradients in both layouts (float64,
// within 1e-5), the dense ancestor mask against each row's causal mask, and the block form against the dense one.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { TrainerClient, toRows, type TrainingBatch } from "../clients/ts/index.ts";
import { Core, startCore, type CoreOptions } from "../rl-core/core/index.ts";
import { trainerPython } from "./grpc-helpers.ts";
import { ROOT, startStack, tempDir, type Stack } from "./helpers.ts";
import { requireInCi } from "./require-in-ci.ts";
import { playGroup, type PlayedGroup } from "./tree-sessions.ts";

const CORES: Array<Partial<CoreOptions>> = [
  { estimator: "grpo", lossAgg: "seq-mean-token-mean", layout: "tree" },
  { estimator: "reinforce++", lossAgg: "token-mean" },
  { estimator: "tree", lossAgg: "seq-mean-token-sum-norm", maxLen: 512, layout: "tree" },
];

let stack: Stack;
const cores: Core[] = [];
const dirs: string[] = [];
let played: PlayedGroup[] = [];

async function read(core: Core, layout: "rows" | "tree", rollouts: number): Promise<TrainingBatch[]> {
  const client = new TrainerClient(core.address, { deadlineMs: 10_000 });
  const out: TrainingBatch[] = [];
  const seen = new Set<string>();
  const ac = new AbortController();
  try {
    for await (const b of client.batches({ signal: ac.signal, maxInFlight: 64, layout })) {
      out.push(b);
      for (const r of b.rowInfo) seen.add(r.rolloutId);
      if (seen.size >= rollouts) ac.abort();
    }
  } finally {
    client.close();
  }
  return out.sort((a, b) => a.batchId - b.batchId);
}

before(async () => {
  stack = await startStack({
    gateway: {
      grpcPort: 0,
      repairHistory: false,
      trajectories: { trainSegments: ["main", "compaction", "sub_agent"] },
    },
  });
  for (const [i, options] of CORES.entries()) {
    const dataDir = tempDir(`tree-core-${i}`);
    dirs.push(dataDir);
    cores.push(
      await startCore({
        gateways: [stack.gateway.grpc!.address],
        consumerGroup: `tree-${i}`,
        port: 0,
        dataDir,
        tokenBudget: 1 << 20,
        batchTimeoutMs: 200,
        batchUnit: "group",
        groupTimeoutMs: 60_000,
        ...options,
      }),
    );
  }
  const gw = stack.gateway.url;
  played = [
    await playGroup(gw, "moving", "moving", 2, 5),
    await playGroup(gw, "compaction", "compaction", 2, 3),
    await playGroup(gw, "continued", "continued", 2, 3),
    await playGroup(gw, "branching", "branching", 3, 3),
  ];
});

after(async () => {
  for (const core of cores) await core.close();
  await stack?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const ROLLOUTS = 9;

describe("tree layout on real batches", () => {
  test(
    "each batch in both layouts: the same rows, each distinct (prefix, token) once, the same loss",
    { timeout: 120_000 },
    async () => {
      for (const core of cores) {
        const rows = await read(core, "rows", ROLLOUTS);
        const tree = await read(core, "tree", ROLLOUTS);
        assert.deepEqual(
          tree.map((b) => b.batchId),
          rows.map((b) => b.batchId),
        );
        let rowTokens = 0;
        let treeTokens = 0;
        for (const [i, r] of rows.entries()) {
          const t = tree[i]!;
          assert.equal(r.layout, "rows");
          assert.equal(t.layout, "tree");
          const s = t.tree!;
          // Rows come back exactly: ids and logprobs at every row through a token; mask, weights and advantages at
          // the row that carries them.
          assert.deepEqual([...t.offsets], [...r.offsets]);
          assert.deepEqual([...toRows(t, t.tokenIds)], [...r.tokenIds]);
          assert.deepEqual([...toRows(t, t.logprobs)], [...r.logprobs]);
          assert.deepEqual([...toRows(t, t.lossMask, true)], [...r.lossMask]);
          assert.deepEqual([...toRows(t, t.lossWeights, true)], [...r.lossWeights]);
          assert.deepEqual([...toRows(t, t.advantages, true)], [...r.advantages]);
          // Each sampled token once: the same trained tokens; the same loss weight total (float64 sums).
          const trained = (b: TrainingBatch) => b.lossMask.reduce((a, x) => a + x, 0);
          assert.equal(trained(t), trained(r));
          assert.equal(t.trainedTokens, r.trainedTokens);
          const sum = (x: Float32Array) => x.reduce((a, v) => a + v, 0);
          assert.ok(Math.abs(sum(t.lossWeights) - sum(r.lossWeights)) < 1e-9);
          // Structure: parents before children, depth = position in every row, every (parent, token) once.
          const seen = new Set<string>();
          let trie = 0;
          for (let k = 0; k < t.tokens; k++) {
            while (k >= s.trieOffsets[trie + 1]!) trie++;
            const p = s.parents[k]!;
            assert.ok(p < k);
            assert.equal(s.positions[k], p < 0 ? 0 : s.positions[p]! + 1);
            assert.ok(s.subtreeEnds[k]! > k && (p < 0 || s.subtreeEnds[k]! <= s.subtreeEnds[p]!));
            const key = `${p < 0 ? `root of ${trie}` : p}:${t.tokenIds[k]}`;
            assert.ok(!seen.has(key), `token ${k} repeats (${key})`);
            seen.add(key);
          }
          for (let row = 0; row < r.rows; row++) {
            for (let j = r.offsets[row]!; j < r.offsets[row + 1]!; j++) {
              const node = s.rowNodes[j]!;
              assert.equal(s.positions[node], j - r.offsets[row]!);
              assert.equal(s.parents[node], j === r.offsets[row] ? -1 : s.rowNodes[j - 1]);
            }
          }
          // One trie per rollout.
          assert.equal(s.trieOffsets.length - 1, new Set(r.rowInfo.map((x) => x.rolloutId)).size);
          assert.equal(t.rowTokens, r.tokens);
          rowTokens += r.tokens;
          treeTokens += t.tokens;
        }
        assert.ok(treeTokens < rowTokens, `tree ${treeTokens} < rows ${rowTokens}`);
        console.log(`core ${cores.indexOf(core)}: rows ${rowTokens} tokens, tree ${treeTokens}`);
      }
    },
  );

  test(
    "logprobs reported in the tree layout give the rows' figures; replies come in the report's layout",
    { timeout: 60_000 },
    async () => {
      const core = cores[0]!;
      const [r] = await read(core, "rows", ROLLOUTS);
      const [t] = await read(core, "tree", ROLLOUTS);
      const client = new TrainerClient(core.address, { deadlineMs: 10_000 });
      try {
        const noisy = t!.logprobs.map((x, k) => x + 0.01 * Math.sin(k));
        const byTree = await client.reportLogprobs(t!.batchId, noisy, { importanceCap: 2 });
        const byRows = await client.reportLogprobs(r!.batchId, toRows(t!, noisy), { importanceCap: 2 });
        assert.deepEqual(byTree.harnesses, byRows.harnesses);
        assert.equal(byTree.importanceWeights!.length, t!.tokens);
        assert.deepEqual([...toRows(t!, byTree.importanceWeights!, true)], [...byRows.importanceWeights!]);
        const advTree = await client.computeAdvantages({ batchId: t!.batchId, estimator: "grpo", layout: "tree" });
        assert.deepEqual([...advTree.advantages], [...t!.advantages]);
        // GAE with the trainer's values in the tree layout: the rows' answer at the row token each tree token carries.
        const values = t!.logprobs.map((x, k) => Math.cos(k) + x / 10);
        const gaeTree = await client.computeAdvantages({ batchId: t!.batchId, values, layout: "tree" });
        const gaeRows = await client.computeAdvantages({
          batchId: r!.batchId,
          values: toRows(t!, values),
          layout: "rows",
        });
        const { rowNodes, tokenRows } = t!.tree!;
        for (let row = 0; row < r!.rows; row++) {
          for (let i = r!.offsets[row]!; i < r!.offsets[row + 1]!; i++) {
            if (tokenRows[rowNodes[i]!] !== row) continue;
            assert.equal(gaeTree.advantages[rowNodes[i]!], gaeRows.advantages[i]);
            assert.equal(gaeTree.returns![rowNodes[i]!], gaeRows.returns![i]);
          }
        }
        await assert.rejects(
          client.reportLogprobs(t!.batchId, new Float32Array(t!.tokens + 1)),
          /rows layout\) or \d+ \(tree layout\)/,
        );
      } finally {
        client.close();
      }
    },
  );

  const python = trainerPython();
  const torch = python ? spawnSync(python, ["-c", "import torch"]).status === 0 : false;
  test(
    "the PyTorch trainer's loss and gradients are the same in both layouts (Python client, float64)",
    {
      skip: requireInCi(
        "python3-torch python3-grpcio python3-numpy",
        torch ? null : "python3-torch, grpcio and numpy are needed under /usr/bin/python3",
      ),
      timeout: 300_000,
    },
    async () => {
      // Not spawnSync: the cores the Python client reads from run in this process.
      const child = spawn(python!, ["-m", "unittest", "-v", "tests.test_tree_layout"], {
        cwd: join(ROOT, "clients", "python"),
        env: {
          ...process.env,
          RLGATE_TREE_CORES: cores.map((c) => c.address).join(","),
          RLGATE_TREE_ROLLOUTS: String(ROLLOUTS),
          RLGATE_TREE_KINDS: played.map((g) => g.kind).join(","),
        },
      });
      let out = "";
      child.stdout.on("data", (d) => (out += d));
      child.stderr.on("data", (d) => (out += d));
      const [status] = await once(child, "close");
      console.log(out);
      assert.equal(status, 0, out);
      assert.match(out, /Ran [1-9]\d* tests?/);
      assert.doesNotMatch(out, /skipped/, out);
    },
  );
});
