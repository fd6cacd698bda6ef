// Rows vs tree batches (`rlgate core --layout tree`) on sessions whose calls share most of their tokens, driven through
// the gateway and the simulated vLLM (test/tree-sessions.ts: a context message moved to the end of every request as
// OpenClaw does, compactions, continued sessions, a branching group). Per session kind: the tokens a trainer's
// forward passes take per batch in each layout against the rollouts' unique tokens (the gateway's count), and what a
// trie per group would take instead of one per rollout. Then the torch trainer's step (forward + backward) on CPU in
// both layouts (bench/tree-step.py). Not part of the test run.
//
//   npm run bench:tree [-- --turns 16 --n 4 --python /usr/bin/python3 --rows-per-pass 4 --tokens-only]
import { spawn } from "node:child_process";
import { once } from "node:events";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { TrainerClient, type TrainingBatch } from "../clients/ts/index.ts";
import { startCore } from "../rl-core/core/index.ts";
import { ROOT, startStack, tempDir } from "../test/helpers.ts";
import { CAPTURED, capturedLayout } from "../test/tree-fixtures.ts";
import { playGroup, SESSION_KINDS, type PlayedGroup } from "../test/tree-sessions.ts";
import { fromSnakeCase } from "../util/json-case.ts";

const { values } = parseArgs({
  options: {
    turns: { type: "string", default: "16" },
    n: { type: "string", default: "4" },
    python: { type: "string", default: process.env["RLGATE_PYTHON"] ?? "/usr/bin/python3" },
    "rows-per-pass": { type: "string", default: "4" },
    // The token figures alone, without the trainer's step (minutes of CPU on a shared machine).
    "tokens-only": { type: "boolean", default: false },
  },
});
const turns = Number(values.turns);
const n = Number(values.n);

async function read(address: string, layout: "rows" | "tree", rollouts: number): Promise<TrainingBatch[]> {
  const client = new TrainerClient(address, { deadlineMs: 30_000 });
  const out: TrainingBatch[] = [];
  const seen = new Set<string>();
  const ac = new AbortController();
  try {
    for await (const b of client.batches({ signal: ac.signal, maxInFlight: 256, layout })) {
      out.push(b);
      for (const r of b.rowInfo) seen.add(r.rolloutId);
      if (seen.size >= rollouts) ac.abort();
    }
  } finally {
    client.close();
  }
  return out.sort((a, b) => a.batchId - b.batchId);
}

/**
 * Nodes of one trie per group: each rollout's trie merged into its group's where ids and prefixes agree, a node
 * shared only while at most one rollout trains it (a node carries one advantage, one policy version): what a group
 * trie would hold. Measured, not served.
 */
function groupTrieNodes(batches: readonly TrainingBatch[], group: (rollout: string) => string): Map<string, number> {
  const nodes = new Map<string, number>();
  const candidates = new Map<string, Map<string, Array<{ node: number; owner: string | null }>>>();
  for (const b of batches) {
    const s = b.tree!;
    for (let k = 0; k + 1 < s.trieOffsets.length; k++) {
      const from = s.trieOffsets[k]!;
      const rollout = b.rowInfo[s.tokenRows[from]!]!.rolloutId;
      const g = group(rollout);
      let table = candidates.get(g);
      if (!table) candidates.set(g, (table = new Map()));
      const mapped = new Int32Array(s.trieOffsets[k + 1]! - from);
      for (let t = from; t < s.trieOffsets[k + 1]!; t++) {
        const p = s.parents[t]!;
        const key = `${p < 0 ? -1 : mapped[p - from]}:${b.tokenIds[t]}`;
        const trained = b.lossMask[t] === 1;
        let list = table.get(key);
        if (!list) table.set(key, (list = []));
        let hit = trained ? list.find((c) => c.owner === null) : list[0];
        if (!hit) {
          hit = { node: nodes.get(g) ?? 0, owner: null };
          nodes.set(g, hit.node + 1);
          list.push(hit);
        }
        if (trained) hit.owner = rollout;
        mapped[t - from] = hit.node;
      }
    }
  }
  return nodes;
}

/** Real captured sessions (trajectory/fixtures), one rollout each: rows vs tree vs unique tokens. */
function capturedTable(): void {
  console.log(
    "captured sessions (trajectory/fixtures, the real CLIs against the gateway and the sim), one rollout each:\n",
  );
  console.log(
    "session                          calls  trajectories  rows tokens  tree tokens  unique  rows/unique  tree/unique",
  );
  for (const name of CAPTURED) {
    const c = capturedLayout(name);
    console.log(
      `${name.padEnd(33)}${String(c.calls).padStart(5)}${String(c.rows).padStart(14)}${String(c.rowTokens).padStart(13)}` +
        `${String(c.view.size).padStart(13)}${String(c.unique).padStart(8)}${(c.rowTokens / c.unique).toFixed(2).padStart(13)}` +
        `${(c.view.size / c.unique).toFixed(3).padStart(13)}`,
    );
  }
  console.log("");
}

async function main(): Promise<void> {
  capturedTable();
  const stack = await startStack({
    gateway: {
      grpcPort: 0,
      repairHistory: false,
      trajectories: { trainSegments: ["main", "compaction", "sub_agent"] },
    },
  });
  const dataDir = tempDir("bench-tree-core");
  const core = await startCore({
    gateways: [stack.gateway.grpc!.address],
    port: 0,
    metricsPort: null,
    dataDir,
    tokenBudget: 1 << 22,
    batchTimeoutMs: 200,
    batchUnit: "group",
    groupTimeoutMs: 600_000,
  });
  try {
    const gw = stack.gateway.url;
    const played: PlayedGroup[] = [];
    for (const kind of SESSION_KINDS) {
      // Compaction and continued sessions run `turns` before and after their restart.
      const size = kind === "compaction" || kind === "continued" ? Math.ceil(turns / 2) : turns;
      played.push(await playGroup(gw, kind, `bench-${kind}`, n, size));
    }
    const rollouts = played.reduce((a, g) => a + g.rollouts.length, 0);
    const unique = new Map<string, number>();
    for (const g of played) {
      for (const id of g.rollouts) {
        const res = await fetch(`${gw}/api/rollouts/${id}/trajectories`);
        const rec = fromSnakeCase<{ stats: { uniqueTokens: number } }>(await res.json());
        unique.set(id, rec.stats.uniqueTokens);
      }
    }
    const rows = await read(core.address, "rows", rollouts);
    const tree = await read(core.address, "tree", rollouts);
    const kindOf = new Map(played.flatMap((g) => g.rollouts.map((id) => [id, g] as const)));
    const fig = new Map(
      SESSION_KINDS.map((k) => [k, { rows: 0, tree: 0, trajectories: 0, unique: 0, group: 0, prompt: Infinity }]),
    );
    for (const b of rows) {
      b.rowInfo.forEach((info, r) => {
        const f = fig.get(kindOf.get(info.rolloutId)!.kind)!;
        f.rows += b.offsets[r + 1]! - b.offsets[r]!;
        f.trajectories++;
      });
    }
    for (const b of tree) {
      const s = b.tree!;
      for (let k = 0; k + 1 < s.trieOffsets.length; k++) {
        const info = b.rowInfo[s.tokenRows[s.trieOffsets[k]!]!]!;
        const f = fig.get(kindOf.get(info.rolloutId)!.kind)!;
        f.tree += s.trieOffsets[k + 1]! - s.trieOffsets[k]!;
        // The prompt before the rollout's first trained token: what its group's rollouts share under real sampling.
        let first = s.trieOffsets[k]!;
        while (first < s.trieOffsets[k + 1]! && !b.lossMask[first]) first++;
        f.prompt = Math.min(f.prompt, s.positions[first]!);
      }
    }
    for (const [id, u] of unique) fig.get(kindOf.get(id)!.kind)!.unique += u;
    for (const [g, count] of groupTrieNodes(tree, (id) => kindOf.get(id)!.group))
      fig.get(played.find((p) => p.group === g)!.kind)!.group += count;

    console.log(
      "group trie: one trie per group instead of per rollout, a node shared while at most one rollout trains it. 'sim': the\n" +
        "sim answers a prompt the same in every rollout, so groups share their whole histories (an upper bound);\n" +
        "'sampled': rollouts that diverge at their first sampled token, as sampling does, share the prompt before it.\n",
    );
    console.log(
      `rows vs tree: ${n} rollouts per kind, ${turns} calls per rollout, sim upstream, ${rows.length} batches (whole groups)\n`,
    );
    console.log(
      "kind        trajectories  rows tokens  tree tokens  unique  rows/unique  tree/unique  group trie/tree",
    );
    for (const [kind, f] of fig) {
      console.log(
        `${kind.padEnd(12)}${String(f.trajectories).padStart(12)}${String(f.rows).padStart(13)}${String(f.tree).padStart(13)}` +
          `${String(f.unique).padStart(8)}${(f.rows / f.unique).toFixed(2).padStart(13)}${(f.tree / f.unique).toFixed(3).padStart(13)}` +
          `${(f.group / f.tree).toFixed(3).padStart(17)}${((f.tree - (n - 1) * f.prompt) / f.tree).toFixed(3).padStart(9)}`,
      );
    }
    if (values["tokens-only"]) return;
    // Asynchronously: the core the step reads its batches from runs in this process.
    const child = spawn(
      values.python,
      [
        join(ROOT, "bench", "tree-step.py"),
        "--core",
        core.address,
        "--rollouts",
        String(rollouts),
        "--rows-per-pass",
        values["rows-per-pass"],
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    const [code] = await once(child, "close");
    if (code !== 0) throw new Error(`tree-step.py exited with ${code}`);
    const t = JSON.parse(out.trim().split("\n").at(-1)!) as Record<
      "rows" | "tree",
      { tokens: number; seconds: number; loss: number }
    >;
    console.log(
      `\ntrainer step on CPU (TinyLM 64 wide, 2 layers, one torch thread; forward + backward of the clipped surrogate, median of 3):\n` +
        `  rows: ${t.rows.tokens} tokens in micro-batches of ${values["rows-per-pass"]} rows, ${t.rows.seconds.toFixed(2)} s\n` +
        `  tree: ${t.tree.tokens} tokens, one trie per pass, ${t.tree.seconds.toFixed(2)} s  (${(t.rows.seconds / t.tree.seconds).toFixed(1)}x faster)\n` +
        `  loss rows ${t.rows.loss.toPrecision(9)}, tree ${t.tree.loss.toPrecision(9)}`,
    );
  } finally {
    await core.close();
    await stack.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
