// The entry point: a rollout's calls in, trajectories out.
import { RolloutTree } from "./rollout-tree.ts";
import type { CallTokens, ReconstructOptions, Reconstruction } from "./types.ts";

export function reconstructRollout(calls: readonly CallTokens[], options: ReconstructOptions): Reconstruction {
  const tree = new RolloutTree(options.chatFormat);
  for (const call of [...calls].sort((a, b) => a.callSeq - b.callSeq)) tree.add(call);
  return tree.build(options);
}
