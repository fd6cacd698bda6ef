// The policy version of every trained token, from the core's group processing through packing to a trainer's view
// (clients/ts tokenVersions), in both batch layouts and under each --stale mode, against versions computed here
// independently: each sampled token's position in its call's answer, and the recorded runs over that answer.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, test } from "node:test";
import { decodeBatch, tokenVersions, type TrainingBatch } from "../../clients/ts/index.ts";
import { bytesOf, type CallInfo } from "../../protocol/index.ts";
import { buildBatch } from "./batch-packer.ts";
import type { PendingRollout } from "./core-store.ts";
import { groupAdvantages } from "./group-advantages.ts";
import type { StaleMode } from "./staleness.ts";
import { pending } from "./test-support.ts";
import { treeBatch } from "./tree-layout.ts";
import { requireInCi } from "../../test/require-in-ci.ts";

const PYTHON = process.env.RLGATE_PYTHON ?? "/usr/bin/python3";
const noPython = requireInCi("python3", spawnSync(PYTHON, ["-c", "pass"]).status === 0 ? null : `no ${PYTHON}`);

// The Python client's rlgate_client.token_versions over a batch given as JSON (its module alone: no grpc needed).
const PY_VERSIONS = `
import importlib.util, json, sys
from types import SimpleNamespace as NS
spec = importlib.util.spec_from_file_location("versions", sys.argv[1])
versions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(versions)
b = json.load(sys.stdin)
runs = lambda c: [NS(start=r["start"], version=r["version"]) for r in c.get("versionRuns", [])]
calls = lambda info: [NS(seq=c["seq"], policy_version=c["policyVersion"], version_runs=runs(c)) for c in info["calls"]]
batch = NS(layout=b["layout"], token_ids=b["tokenIds"], offsets=b["offsets"], call_index=b["callIndex"],
           loss_mask=b["lossMask"], token_rows=b["tokenRows"],
           row_info=[NS(rollout_id=i["rolloutId"], calls=calls(i)) for i in b["rowInfo"]])
print(json.dumps(versions.token_versions(batch)))
`;

function pythonTokenVersions(batch: TrainingBatch): Array<string | null> {
  const input = JSON.stringify({
    layout: batch.layout,
    tokenIds: [...batch.tokenIds],
    offsets: [...batch.offsets],
    callIndex: [...batch.callIndex],
    lossMask: [...batch.lossMask],
    tokenRows: [...(batch.tree?.tokenRows ?? [])],
    rowInfo: batch.rowInfo.map((r) => ({ rolloutId: r.rolloutId, calls: r.calls })),
  });
  const module = join(import.meta.dirname, "../../clients/python/rlgate_client/versions.py");
  const run = spawnSync(PYTHON, ["-c", PY_VERSIONS, module], { input, encoding: "utf8" });
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout) as Array<string | null>;
}

/** The version run covering sampled position `k` of a call's answer. */
function versionAt(call: CallInfo, k: number): string {
  let version = call.policyVersion;
  for (const run of call.versionRuns ?? []) if (run.start <= k) version = run.version;
  return version;
}

/** Per token of a row: the call that sampled it and its position in that call's answer (null on context). */
type Sampled = { call: number; k: number } | null;

/**
 * An agent rollout of three trajectories. The first trains call 1's answer (6 tokens, an update from version 1 to 4
 * after its 3rd). Call 2 was asked for two choices (an update from 4 to 6 after their 1st token) that begin alike:
 * the second choice's trajectory comes first and trains their 2 common tokens, so the first choice's trajectory has
 * them untrained (mask 0) before its own 2 — the runs' positions are the answer's, not its trained tokens'. Both
 * re-serialize call 1's answer after its 3rd token (shared, mask 0). Ids are unique to the rollout past the prompt.
 */
function rollout(id: string, reward: number, base: number): { r: PendingRollout; sampled: Sampled[][] } {
  const update = (from: string, to: string, at: number) => [
    { start: 0, version: from },
    { start: at, version: to },
  ];
  const calls: CallInfo[] = [
    { seq: 1, policyVersion: "1", finishReason: "tool_calls", versionRuns: update("1", "4", 3) },
    { seq: 2, policyVersion: "4", finishReason: "stop", versionRuns: update("4", "6", 1) },
    { seq: 2, policyVersion: "4", finishReason: "stop", versionRuns: update("4", "6", 1) },
  ];
  const answer1 = Array.from({ length: 6 }, (_, k) => base + k);
  const [choice0, choice1] = [50, 60].map((b) => [base + 40, base + 41, base + b, base + b + 1]);
  const head = [7, 8, ...answer1.slice(0, 3), 9];
  const rows = [
    { ids: [7, 8, ...answer1], mask: [0, 0, 1, 1, 1, 1, 1, 1] },
    { ids: [...head, ...choice1!], mask: [0, 0, 0, 0, 0, 0, 1, 1, 1, 1] },
    { ids: [...head, ...choice0!], mask: [0, 0, 0, 0, 0, 0, 0, 0, 1, 1] },
  ];
  const answer = (call: number) => [0, 1, 2, 3].map((k) => ({ call, k }));
  const shared = [null, null, ...[0, 1, 2].map((k) => ({ call: 0, k })), null];
  const sampled: Sampled[][] = [
    [null, null, ...answer1.map((_, k) => ({ call: 0, k }))],
    [...shared, ...answer(2)],
    [...shared, ...answer(1)],
  ];
  const callIndex = sampled.flatMap((row) => row.map((s) => s?.call ?? -1));
  const r = pending(id, reward, rows, { calls, callIndex: bytesOf(Int32Array.from(callIndex)) });
  return { r, sampled };
}

/** Per row token of the batch: the version a trainer reads (tree: through the row token's tree token). */
function rowTokenVersions(batch: TrainingBatch): Array<string | null> {
  const versions = tokenVersions(batch);
  if (!batch.tree) return versions;
  return Array.from(batch.tree.rowNodes, (node) => versions[node]!);
}

/** Per row token: whether it is trained (tree: trained at the tree token and carried by this row). */
function rowTokenTrained(batch: TrainingBatch): boolean[] {
  if (!batch.tree) return Array.from(batch.lossMask, (m) => m === 1);
  const { rowNodes, tokenRows } = batch.tree;
  const out: boolean[] = [];
  for (let r = 0; r < batch.rows; r++)
    for (let i = batch.offsets[r]!; i < batch.offsets[r + 1]!; i++)
      out.push(batch.lossMask[rowNodes[i]!] === 1 && tokenRows[rowNodes[i]!] === r);
  return out;
}

describe("per-token versions: the core's rows, both layouts, each --stale mode, against the answers' own positions", () => {
  const rule = { maxStaleness: 2, current: 6 } as const;
  for (const mode of ["keep", "mask"] as const satisfies readonly StaleMode[])
    for (const layout of ["rows", "tree"] as const)
      test(`${mode}, ${layout}: rollouts of the same call seqs in one batch, choices sharing their first tokens`, async () => {
        const made = [rollout("a", 1, 1000), rollout("b", 0, 2000), rollout("c", 0.5, 3000)];
        const group = await groupAdvantages(
          made.map((m) => m.r),
          { estimator: "grpo", staleness: { ...rule, mode } },
        );
        const stored = await buildBatch(1, group.rows, {
          normalize: "none",
          lossAgg: "token-mean",
          estimator: "grpo",
          lossTokens: 0,
        });
        const batch = decodeBatch(layout === "tree" ? treeBatch(stored) : stored);
        const versions = rowTokenVersions(batch);
        if (!noPython) assert.deepEqual(pythonTokenVersions(batch), tokenVersions(batch), "the Python client's view");
        const trained = rowTokenTrained(batch);

        // Expected, from the answers: rows in the batch are the rollouts' rows in order.
        const expected: Array<string | null> = [];
        const expectTrained: boolean[] = [];
        let stale = 0;
        for (const { r, sampled } of made) {
          let at = 0;
          for (const row of sampled) {
            const mask = r.lossMask.subarray(at, (at += row.length));
            row.forEach((s, t) => {
              const version = s ? versionAt(r.calls[s.call]!, s.k) : null;
              const isStale = mask[t] === 1 && Number(version) < rule.current - rule.maxStaleness;
              if (isStale) stale++;
              expected.push(mask[t] === 1 ? version : null);
              expectTrained.push(mask[t] === 1 && !(isStale && mode === "mask"));
            });
          }
        }
        assert.deepEqual(trained, expectTrained, "trained tokens");
        assert.deepEqual(
          versions.map((v, i) => (expectTrained[i] ? v : null)),
          expected.map((v, i) => (expectTrained[i] ? v : null)),
          "the version of every trained token",
        );
        assert.equal(stale, 9, "3 stale tokens (version 1) per rollout");
        assert.equal(
          batch.staleTokens,
          mode === "keep" ? stale : 0,
          "stale tokens trained: all kept, or none once masked",
        );
        assert.equal(group.staleMasked, mode === "mask" ? stale : 0);
        assert.deepEqual(
          batch.rowInfo.map((r) => r.staleness),
          mode === "keep" ? [5, 2, 0, 5, 2, 0, 5, 2, 0] : [2, 2, 0, 2, 2, 0, 2, 2, 0],
          "current − the oldest trained version, per row",
        );
      });
});
