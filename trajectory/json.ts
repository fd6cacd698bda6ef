// JSON for `GET /api/rollouts/{id}/trajectories`: typed arrays become plain arrays; a logprob the upstream never sent
// (NaN) becomes null.
import type { Reconstruction, Trajectory, TrajectoryRouting } from "./types.ts";

export interface TrajectoryJson extends Omit<Trajectory, "tokenIds" | "lossMask" | "logprobs" | "routedExperts"> {
  tokenIds: number[];
  lossMask: number[];
  logprobs: Array<number | null>;
  /** MoE routing replay: the rows' shape and dtype, and `data` as base64 of the little-endian [tokens, layers, topK]. */
  routedExperts?: Omit<TrajectoryRouting, "data"> & { data: string };
}

export interface ReconstructionJson extends Omit<Reconstruction, "trajectories"> {
  trajectories: TrajectoryJson[];
}

export function trajectoryToJson({ routedExperts, ...t }: Trajectory): TrajectoryJson {
  return {
    ...t,
    tokenIds: Array.from(t.tokenIds),
    lossMask: Array.from(t.lossMask),
    logprobs: Array.from(t.logprobs, (lp) => (Number.isNaN(lp) ? null : lp)),
    ...(routedExperts
      ? { routedExperts: { ...routedExperts, data: Buffer.from(routedExperts.data).toString("base64") } }
      : {}),
  };
}

export function reconstructionToJson(rec: Reconstruction): ReconstructionJson {
  return { ...rec, trajectories: rec.trajectories.map(trajectoryToJson) };
}
