// The weight-update routes of both simulated servers, as the real ones serve them:
//   vLLM (with VLLM_SERVER_DEV_MODE=1): `POST /pause?mode=abort|wait|keep` (older: `?wait_for_inflight_requests=true`
//   for wait) → {"status":"paused"}, `POST /resume` → {"status":"resumed"}, `GET /is_paused` → {"is_paused": bool}.
//   vLLM learns no version name: the sim counts each resume after a pause as an update (version 1, 2, …), unless
//   `POST /resume?version=V` names it (the sim's own addition, for tests).
//   SGLang: `POST /pause_generation {"mode": "abort"|"in_place"|"retract"}`, `POST /continue_generation`,
//   `POST /update_weight_version {"new_version": V}`, `GET /get_weight_version` → {"weight_version": V}.
// Both: `GET /rlgate-sim/weights` → the version, the paused flag and the log of updates (sim/weights/state.ts).
import type { FlavorName } from "../flavor.ts";
import type { PauseMode, SimWeights } from "./state.ts";

export interface WeightsAnswer {
  status: number;
  body: unknown;
}

type Route = (weights: SimWeights, query: URLSearchParams, body: unknown) => Promise<WeightsAnswer>;

const ok = (body: unknown): WeightsAnswer => ({ status: 200, body });
const bad = (message: string): WeightsAnswer => ({ status: 400, body: { error: message } });

const VLLM_MODES: Record<string, PauseMode> = { abort: "abort", wait: "wait", keep: "keep" };
// SGLang's in_place keeps requests where they are; retract sends them back to the queue with their tokens, to be
// recomputed on continue: for the client both continue the same answer after the update.
const SGLANG_MODES: Record<string, PauseMode> = { abort: "abort", in_place: "keep", retract: "keep" };

function field(body: unknown, name: string): unknown {
  return typeof body === "object" && body !== null ? (body as Record<string, unknown>)[name] : undefined;
}

const state: Route = async (weights) =>
  ok({ version: weights.version, paused: weights.paused, mode: weights.mode, log: weights.log });

const VLLM: Record<string, Record<string, Route>> = {
  "/pause": {
    POST: async (weights, query) => {
      const mode = query.get("mode") ?? (query.get("wait_for_inflight_requests") === "true" ? "wait" : "abort");
      const pauseMode = VLLM_MODES[mode];
      if (!pauseMode) return bad(`mode must be one of abort, wait, keep; got '${mode}'`);
      await weights.pause(pauseMode);
      return ok({ status: "paused" });
    },
  },
  "/resume": {
    POST: async (weights, query) => {
      if (weights.paused) weights.setVersion(query.get("version") ?? String(updates(weights) + 1));
      weights.resume();
      return ok({ status: "resumed" });
    },
  },
  "/is_paused": { GET: async (weights) => ok({ is_paused: weights.paused }) },
  "/rlgate-sim/weights": { GET: state },
};

const SGLANG: Record<string, Record<string, Route>> = {
  "/pause_generation": {
    POST: async (weights, _query, body) => {
      const mode = field(body, "mode") ?? "abort";
      const pauseMode = typeof mode === "string" ? SGLANG_MODES[mode] : undefined;
      if (!pauseMode) return bad(`mode must be one of abort, in_place, retract; got '${String(mode)}'`);
      await weights.pause(pauseMode);
      return ok({ message: "Generation paused successfully.", status: "ok" });
    },
  },
  "/continue_generation": {
    POST: async (weights) => {
      weights.resume();
      return ok({ message: "Generation continued successfully.", status: "ok" });
    },
  },
  "/update_weight_version": {
    POST: async (weights, _query, body) => {
      const version = field(body, "new_version");
      if (typeof version !== "string" || version === "") return bad("new_version: a non-empty string is required");
      weights.setVersion(version);
      return ok({ success: true, new_version: version, message: `Weight version updated to ${version}` });
    },
  },
  "/get_weight_version": { GET: async (weights) => ok({ weight_version: weights.version }) },
  "/rlgate-sim/weights": { GET: state },
};

/** Updates so far (resumes after a pause), which names vLLM's next version when the resume names none. */
function updates(weights: SimWeights): number {
  return weights.log.filter((e) => e.event === "resume").length;
}

/** The weights route for a method and path, or undefined when the path is not one. */
export function weightsRoute(flavor: FlavorName, method: string, path: string): Route | undefined {
  const table = flavor === "sglang" ? SGLANG : VLLM;
  return Object.hasOwn(table, path) ? table[path]![method] : undefined;
}
