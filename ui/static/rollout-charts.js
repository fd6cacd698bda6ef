// @ts-check
// Breaks and amplification of the latest finished rollouts of the table's page (the reconstruction's figures, read
// per rollout): a bar per rollout, coloured by its most frequent break kind, and amplification against 1.1.
import { breakCount, breakTitle, cssVar, svgOf } from "./dom.js";
import { bars, frame, guide, note } from "./chart.js";
import { state } from "./state.js";

/** @typedef {import("./types.js").Row} Row */

const LATEST = 40;
const AMPLIFICATION_TARGET = 1.1;

export function renderRolloutCharts() {
  const finished = /** @type {(Row & { summary: NonNullable<Row["summary"]> })[]} */ (
    [...state.rows.values()].filter((r) => r.summary && r.record.status !== "open")
  )
    .sort((a, b) => (a.record.finishedAt || 0) - (b.record.finishedAt || 0))
    .slice(-LATEST);
  /** @param {number} i */
  const rowAt = (i) => /** @type {(typeof finished)[number]} */ (finished[i]);

  const breakCounts = finished.map((r) => breakCount(r.summary.stats.breaks));
  const breaksChart = svgOf("#chart-breaks");
  const maxBreaks = Math.max(1, ...breakCounts);
  frame(breaksChart, maxBreaks, String);
  bars(
    breaksChart,
    breakCounts,
    (i) => {
      const [kind] = Object.entries(rowAt(i).summary.stats.breaks).sort((a, b) => b[1] - a[1])[0] || [];
      return cssVar(kind || "main");
    },
    maxBreaks,
    (i, v) => `${rowAt(i).record.id}: ${v} breaks (${breakTitle(rowAt(i).summary.stats.breaks)})`,
  );
  if (!finished.length) note(breaksChart, "no finished rollout on this page yet");

  const amps = finished.map((r) => r.summary.stats.amplification || 0);
  const ampChart = svgOf("#chart-amp");
  const maxAmp = Math.max(1.2, ...amps);
  frame(ampChart, maxAmp, (v) => v.toFixed(1));
  bars(
    ampChart,
    amps,
    (i) => ((amps[i] ?? 0) > AMPLIFICATION_TARGET ? cssVar("reserialization") : cssVar("compaction")),
    maxAmp,
    (i, v) => `${rowAt(i).record.id}: ${v.toFixed(3)}`,
  );
  guide(ampChart, AMPLIFICATION_TARGET, maxAmp, cssVar("branch"));
  if (!finished.length) note(ampChart, "no finished rollout on this page yet");
}
