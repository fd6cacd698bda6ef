// GET /api/series: what the live page's charts show, from the store (store/series.ts), so a page opened after a run
// draws that run.
//   ?window_s=S   the last S seconds of activity (default 600, at most 7 days)
//   ?points=N     windows in it (default 120, at most 1000); each is a whole number of seconds
//   ?to=MS        the window's end (epoch ms); default: the newest second anything happened in, or now
// Answer: {from (the first window's start), to, step_ms, last_activity, points: [{at, calls, errors, prompt_tokens, sampled_tokens,
// overhead_p50, overhead_p99, latency_p50, latency_p99, finished, reward_mean}]} (percentiles within 9 %, ms).
import type { Store } from "../store/store.ts";
import { GatewayError } from "./errors.ts";

const DEFAULT_WINDOW_S = 600;
const MAX_WINDOW_S = 7 * 24 * 3600;
const DEFAULT_POINTS = 120;
const MAX_POINTS = 1000;

function numberParam(url: URL, name: string, fallback: number, max: number): number {
  const text = url.searchParams.get(name);
  if (text === null || text === "") return fallback;
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0 || n > max)
    throw new GatewayError("RLGATE_BAD_REQUEST", `${name}: expected a positive number up to ${max}`, { param: name });
  return n;
}

export function seriesAnswer(store: Pick<Store, "series" | "lastActivity">, url: URL, now = Date.now()) {
  const windowS = Math.ceil(numberParam(url, "window_s", DEFAULT_WINDOW_S, MAX_WINDOW_S));
  const points = Math.floor(numberParam(url, "points", DEFAULT_POINTS, MAX_POINTS));
  const lastActivity = store.lastActivity();
  const to = Math.floor(numberParam(url, "to", Math.min(now, (lastActivity ?? now) + 999), Number.MAX_SAFE_INTEGER));
  // Windows longer than a minute are whole minutes: read from the store's minutes.
  const fine = Math.max(1, Math.ceil(windowS / points));
  const stepS = fine > 60 ? Math.ceil(fine / 60) * 60 : fine;
  const series = store.series(to, stepS * 1000, Math.ceil(windowS / stepS));
  return { from: series[0]!.at, to, stepMs: stepS * 1000, lastActivity, points: series };
}
