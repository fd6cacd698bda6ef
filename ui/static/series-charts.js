// @ts-check
// The charts of calls, tokens, overhead, latency and rewards over time, from what the store holds (GET /api/series):
// a page opened after a run draws that run, and a page open during one redraws as calls are committed. The window
// (last minute … last week of activity) is the reader's choice.
import { api } from "./api.js";
import { $, clock, cssVar, fmt, input, svgOf } from "./dom.js";
import { bars, endLabels, frame, line, note } from "./chart.js";

/** @typedef {import("./types.js").Series} Series */
/** @typedef {import("./types.js").SeriesPoint} SeriesPoint */

const POINTS = 60;
/** A window with no event still slides forward this often (the clock moves). */
const IDLE_REFRESH_MS = 10_000;

let series = /** @type {Series | null} */ (null);
let changed = false;
let loadedAt = 0;
let loading = false;

/** Reads the series of the window chosen and draws it. */
export async function loadSeries() {
  if (loading) return;
  loading = true;
  try {
    changed = false;
    loadedAt = Date.now();
    series = await api(`/api/series?window_s=${input("#series-window").value}&points=${POINTS}`);
    renderSeries();
  } finally {
    loading = false;
  }
}

/** A call or a finish was committed: the next tick reads the series again. */
export function seriesChanged() {
  changed = true;
}

/**
 * Every few seconds: read again what changed, or what the passing time moved. A long window is read less often (a
 * week is up to 604,800 stored seconds): at most once per 1/600 of it.
 */
export function tickSeries() {
  const since = Date.now() - loadedAt;
  const every = (Number(input("#series-window").value) * 1000) / 600;
  if ((changed && since >= every) || since > Math.max(IDLE_REFRESH_MS, every)) loadSeries().catch(() => {});
}

/** @param {number} ms */
const span = (ms) => (ms >= 3_600_000 ? `${ms / 3_600_000} h` : ms >= 60_000 ? `${ms / 60_000} min` : `${ms / 1000} s`);

/** @param {number} v */
const compact = (v) =>
  v >= 1000 ? `${(v / 1000).toFixed(v >= 10_000 ? 0 : 1)}k` : v >= 10 ? v.toFixed(0) : v.toFixed(1);

/**
 * The largest of the values (at least `floor`), for a y axis.
 * @param {(number | null)[]} values
 * @param {number} floor
 */
const maxOf = (values, floor) => Math.max(floor, ...values.map((v) => v ?? 0));

/**
 * @param {SVGSVGElement} svgEl
 * @param {Series} s
 */
function timeLabels(svgEl, s) {
  endLabels(svgEl, clock(s.from), clock(s.to));
}

function renderSeries() {
  const s = series;
  if (!s) return;
  const points = s.points;
  const perSecond = 1000 / s.stepMs;
  const calls = points.reduce((n, p) => n + p.calls, 0);
  $("#series-span").textContent = s.lastActivity
    ? `${span(s.stepMs)} per bar, to ${clock(s.to)}${s.to < Date.now() - 60_000 ? " (the last activity)" : ""}`
    : "nothing stored yet";
  /** @param {number} i */
  const when = (i) => `${clock(/** @type {SeriesPoint} */ (points[i]).at)}`;

  const rate = points.map((p) => p.calls * perSecond);
  const callsChart = svgOf("#chart-calls");
  const maxRate = maxOf(rate, 1);
  frame(callsChart, maxRate, compact);
  bars(
    callsChart,
    rate,
    (i) => (/** @type {SeriesPoint} */ (points[i]).errors ? cssVar("branch") : cssVar("main")),
    maxRate,
    (i, v) => {
      const p = /** @type {SeriesPoint} */ (points[i]);
      return `${when(i)}: ${p.calls} calls (${fmt(v, 2)}/s)${p.errors ? `, ${p.errors} failed` : ""}`;
    },
    "series-bar",
  );
  timeLabels(callsChart, s);
  callsChart.dataset.calls = String(calls);
  if (!calls) note(callsChart, "no calls in this window");

  const tokensChart = svgOf("#chart-tokens");
  const prompt = points.map((p) => (p.calls ? p.promptTokens * perSecond : null));
  const sampled = points.map((p) => (p.calls ? p.sampledTokens * perSecond : null));
  const maxTokens = maxOf([...prompt, ...sampled], 1);
  frame(tokensChart, maxTokens, compact);
  line(tokensChart, prompt, cssVar("muted"), maxTokens);
  line(tokensChart, sampled, cssVar("main"), maxTokens);
  timeLabels(tokensChart, s);
  if (!calls) note(tokensChart, "no calls in this window");

  /**
   * @param {string} id
   * @param {(number | null)[]} p50
   * @param {(number | null)[]} p99
   */
  const percentiles = (id, p50, p99) => {
    const chart = svgOf(id);
    const max = maxOf(p99, 0.5);
    frame(chart, max, (v) => (v >= 1000 ? `${(v / 1000).toFixed(1)}s` : v.toFixed(v >= 10 ? 0 : 2)));
    line(chart, p50, cssVar("main"), max);
    line(chart, p99, cssVar("reserialization"), max);
    timeLabels(chart, s);
    if (!calls) note(chart, "no calls in this window");
  };
  percentiles(
    "#chart-overhead",
    points.map((p) => p.overheadP50),
    points.map((p) => p.overheadP99),
  );
  percentiles(
    "#chart-latency",
    points.map((p) => p.latencyP50),
    points.map((p) => p.latencyP99),
  );

  const rewardChart = svgOf("#chart-reward");
  const rewards = points.map((p) => p.rewardMean);
  const finished = points.reduce((n, p) => n + p.finished, 0);
  const maxReward = maxOf(rewards, 1);
  frame(rewardChart, maxReward, (v) => v.toFixed(1));
  line(rewardChart, rewards, cssVar("compaction"), maxReward, "reward-point");
  timeLabels(rewardChart, s);
  rewardChart.dataset.finished = String(finished);
  if (!finished) note(rewardChart, "no rollout finished in this window");
}
