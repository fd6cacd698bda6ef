// Whether a call's recorded per-token versions are the versions that sampled its tokens, told by the sim itself: the
// sim scores every answer with a logprob seed of the version its weights had when the request started
// (sim/weights/state.ts versionLogprobSeed), so a token's reported logprob is simLogprob under that version's seed and
// no other (float32 collisions aside). A token the gateway recorded under the wrong version — a continuation tagged
// with the old version, a call held over a pause tagged with the version it arrived under, a run starting one token off
// — reproduces no logprob. In keep mode the sim, like the gateway, keeps the version a request started under (no
// server says at which token new weights took over: docs/weight-updates.md). Needs noise-free logprobs (the sim's
// default) and tokens mode (the call's prompt ids are the context).
import { simLogprob } from "../sim/logprobs.ts";
import { INITIAL_VERSION, versionLogprobSeed } from "../sim/weights/state.ts";
import type { CallRecord } from "../store/records.ts";

export interface VersionCheck {
  /** Tokens whose recorded version did not reproduce their logprob (or that have no logprob or version to check). */
  mismatched: number;
  /** Tokens recorded with a version other than the initial one. */
  updated: number;
}

/** Checks each sampled token of `call` (its first choice) against the version its record gives it. */
export function versionMismatches(call: CallRecord, simSeed: number): VersionCheck {
  const choice = call.choices[0];
  const ids = choice?.tokenIds ?? [];
  const logprobs = choice?.logprobs ?? [];
  const prompt = call.promptTokenIds ?? [];
  const runs = call.policyUpdate?.versions ?? [{ start: 0, version: call.policyVersion ?? null }];
  let mismatched = 0;
  let updated = 0;
  for (let i = 0; i < ids.length; i++) {
    let version: string | null = null;
    for (const run of runs) if (run.start <= i) version = run.version;
    if (version !== null && version !== INITIAL_VERSION) updated++;
    const reported = logprobs[i];
    if (version === null || reported === undefined || !prompt.length) {
      mismatched++;
      continue;
    }
    const context = [...prompt, ...ids.slice(0, i)];
    if (Math.fround(simLogprob(versionLogprobSeed(simSeed, version), context, ids[i]!)) !== reported) mismatched++;
  }
  return { mismatched, updated };
}
