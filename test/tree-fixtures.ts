// Real captured harness sessions (trajectory/fixtures: recorded from the real CLIs against the gateway) rebuilt by the
// reconstruction and laid out as rows and as the tree layout's trie: what a rollout costs a trainer in each layout.
// Used by test/tree-fixtures.test.ts and `npm run bench:tree`.
import { reconstructRollout } from "../trajectory/reconstruct.ts";
import { fixtureCalls, loadCliFixture } from "../trajectory/testing/cli-fixtures.ts";
import { treeView, type TreeView } from "../rl-core/core/tree-layout.ts";

export const CAPTURED = [
  "openclaw-messages",
  "openclaw-tokens",
  "claude-code-compaction-messages",
  "codex-compaction-messages",
  "qwen-code-compaction-messages",
  "qwen-code-continued-tokens",
  "qwen-code-0.24-compress-tokens",
  "opencode-compaction-tokens",
  "pi-chat-compaction-tokens",
] as const;

export interface CapturedLayout {
  name: string;
  calls: number;
  rows: number;
  rowTokens: number;
  unique: number;
  offsets: Int32Array;
  tokenIds: Int32Array;
  lossMask: Uint8Array;
  view: TreeView;
}

/** A fixture's trained trajectories (those with a trained token) as one rollout's rows, and their tree view. */
export function capturedLayout(name: string): CapturedLayout {
  const fixture = loadCliFixture(name);
  // Every kind trained, as `--train-segments main,compaction,sub_agent` does: compactions and sub-agents are rows too.
  const rec = reconstructRollout(fixtureCalls(fixture), {
    rolloutId: fixture.session,
    trainSegments: ["main", "compaction", "sub_agent"],
  });
  const rows = rec.trajectories.filter((t) => t.trained && t.lossMask.some((m) => m === 1));
  const offsets = new Int32Array(rows.length + 1);
  rows.forEach((t, i) => (offsets[i + 1] = offsets[i]! + t.tokenIds.length));
  const tokenIds = new Int32Array(offsets[rows.length]!);
  const lossMask = new Uint8Array(offsets[rows.length]!);
  rows.forEach((t, i) => {
    tokenIds.set(t.tokenIds, offsets[i]!);
    lossMask.set(t.lossMask, offsets[i]!);
  });
  const view = treeView(
    offsets,
    tokenIds,
    lossMask,
    rows.map(() => fixture.session),
  );
  return {
    name,
    calls: fixture.calls.length,
    rows: rows.length,
    rowTokens: tokenIds.length,
    unique: rec.stats.uniqueTokens,
    offsets,
    tokenIds,
    lossMask,
    view,
  };
}
