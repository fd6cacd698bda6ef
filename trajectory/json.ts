// JSON for `GET /api/rollouts/{id}/trajectories`: typed arrays become plain arrays; a logprob the upstream never sent
// (NaN) becomes null.
import type { Reconstruction, Trajectory } from "./types.ts";

export interface TrajectoryJson extends Omit<Trajectory, "tokenIds" | "lossMask" | "logprobs"> {
  tokenIds: number[];
  lossMask: number[];
  logprobs: Array<number | null>;
}

export interface ReconstructionJson extends Omit<Reconstruction, "trajectories"> {
  trajectories: TrajectoryJson[];
}

export function trajectoryToJson(t: Trajectory): TrajectoryJson {
  return {
    ...t,
    tokenIds: Array.from(t.tokenIds),
    lossMask: Array.from(t.lossMask),
    logprobs: Array.from(t.logprobs, (lp) => (Number.isNaN(lp) ? null : lp)),
  };
}

export function reconstructionToJson(rec: Reconstruction): ReconstructionJson {
  return { ...rec, trajectories: rec.trajectories.map(trajectoryToJson) };
}
