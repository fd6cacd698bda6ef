// Training–inference agreement: the logprobs a trainer recomputes for a batch's sampled tokens against the
// inference server's, per harness and for the whole batch ("*"). Only mask-1 tokens where both are finite count.
import { agreement } from "../../util/agreement.ts";
import { klDivergence } from "../kernels/index.ts";
import { LinkError, type Consistency } from "../../protocol/index.ts";

export interface ConsistencyInput {
  offsets: Int32Array;
  lossMask: Uint8Array;
  /** The inference server's sampling logprobs. */
  rollout: Float32Array;
  /** The trainer's. */
  trainer: Float32Array;
  /** Per row. */
  harness: readonly string[];
}

function figures(harness: string, tokens: number[], input: ConsistencyInput, k3: Float32Array): Consistency {
  return { harness, ...agreement(input.rollout, input.trainer, { tokens, k3 }) };
}

export function consistencyFigures(input: ConsistencyInput): Consistency[] {
  const tokensTotal = input.lossMask.length;
  if (input.trainer.length !== tokensTotal || input.rollout.length !== tokensTotal) {
    throw new LinkError(
      "RLGATE_BAD_REQUEST",
      `logprobs have ${input.trainer.length} entries, the batch has ${tokensTotal} tokens`,
    );
  }
  const mask = new Uint8Array(tokensTotal);
  for (let t = 0; t < tokensTotal; t++) {
    mask[t] = input.lossMask[t] && Number.isFinite(input.rollout[t]!) && Number.isFinite(input.trainer[t]!) ? 1 : 0;
  }
  // k3 of KL(inference ‖ trainer): the tokens were sampled by the inference server, d = trainer − inference.
  const k3 = klDivergence({ logp: input.rollout, logpRef: input.trainer, mask, kind: "k3" });
  const all: number[] = [];
  const byHarness = new Map<string, number[]>();
  for (let r = 0; r + 1 < input.offsets.length; r++) {
    const h = input.harness[r] || "unknown";
    let list = byHarness.get(h);
    if (!list) byHarness.set(h, (list = []));
    for (let t = input.offsets[r]!; t < input.offsets[r + 1]!; t++) {
      if (!mask[t]) continue;
      list.push(t);
      all.push(t);
    }
  }
  const out = [figures("*", all, input, k3)];
  for (const [h, list] of [...byHarness].sort((a, b) => a[0].localeCompare(b[0])))
    out.push(figures(h, list, input, k3));
  return out;
}
