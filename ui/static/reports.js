// @ts-check
// The live page's quality panels: training–inference agreement as RL cores report it (one point per trainer logprob
// report, a line per harness) and `rlgate replay score` runs (a table, and the per-call drift of the selected run).
// The page hands it the `agreement` and `replay` events of /api/events and asks it to load on every (re)connect.
import { api } from "./api.js";
import { $, clock, cssVar, el, legendKey, svg, svgOf } from "./dom.js";

/**
 * @typedef {object} Figures
 * @property {string} harness
 * @property {number} tokens
 * @property {number | null} pearson
 * @property {number | null} k3Kl
 * @property {number | null} absDiffP99
 * @property {number | null} absDiffMax
 */
/**
 * @typedef {object} AgreementPoint
 * @property {number} at
 * @property {number} batchId
 * @property {string} core
 * @property {Figures[]} harnesses
 */
/**
 * @typedef {object} ReplayCall
 * @property {string} rolloutId
 * @property {number} callSeq
 * @property {number} choiceIndex
 * @property {string} harness
 * @property {number} tokens
 * @property {number | null} pearson
 * @property {number | null} absDiffP99
 * @property {number | null} absDiffMax
 */
/**
 * @typedef {object} ReplayRun
 * @property {number} id
 * @property {number} at
 * @property {string} upstream
 * @property {string} source
 * @property {string} selection
 * @property {number} rollouts
 * @property {number} completions
 * @property {number} skipped
 * @property {number} errors
 * @property {number} threshold
 * @property {number | null} maxP99
 * @property {Figures} overall
 * @property {string} verdict
 * @property {ReplayCall[]} [calls]
 */

const PALETTE = ["#1d2330", "#2f6fdb", "#e07a10", "#138a8a", "#8a4fd1", "#d23c3c", "#a07a1c", "#7d8592"];
const MAX_POINTS = 2000;
const reports = {
  agreement: /** @type {AgreementPoint[]} */ ([]),
  replays: /** @type {ReplayRun[]} */ ([]),
  selectedReplay: /** @type {number | null} */ (null),
  drift: /** @type {ReplayRun | null} */ (null),
};

/** @param {number | null | undefined} v */
const small = (v) =>
  v === null || v === undefined || Number.isNaN(v)
    ? "—"
    : v !== 0 && Math.abs(v) < 0.01
      ? Number(v).toExponential(1)
      : Number(v).toFixed(Math.abs(v) >= 10 ? 1 : 3);
/** @param {number | null | undefined} v */
const fixed4 = (v) => (v === null || v === undefined || Number.isNaN(v) ? "—" : Number(v).toFixed(4));
/** @param {number} ms */
const when = (ms) => {
  const d = new Date(ms);
  return `${d.toLocaleDateString([], { month: "short", day: "numeric" })} ${clock(ms)}`;
};
/** @param {string} h */
const harnessName = (h) => (h === "*" ? "all harnesses" : h);

/** Reads the agreement reports and replay runs the store holds, and draws them. */
export async function loadReports() {
  try {
    const [{ points }, { replays }] = await Promise.all([
      api(`/api/agreement?limit=${MAX_POINTS}`),
      api("/api/replays?limit=100"),
    ]);
    reports.agreement = points;
    reports.replays = replays;
    renderAgreement();
    renderReplays();
    const newest = replays.at(-1);
    if (!reports.selectedReplay && newest) void selectReplay(newest.id);
  } catch {
    // the rollouts' loader asks for a token or reconnects; these panels follow it
  }
}

/**
 * An `agreement` or `replay` event of the stream.
 * @param {string} event
 * @param {any} value
 */
export function reportEvent(event, value) {
  if (event === "agreement") {
    reports.agreement.push(value);
    if (reports.agreement.length > MAX_POINTS) reports.agreement.splice(0, reports.agreement.length - MAX_POINTS);
    renderAgreement();
  } else if (event === "replay") {
    reports.replays.push(value);
    renderReplays();
    void selectReplay(value.id); // the newest run is the one someone is looking for
  }
}

// ---------- agreement ----------
/** The drawing width of a chart: its viewBox's. */
/** @param {SVGSVGElement} svgEl */
const widthOf = (svgEl) => svgEl.viewBox.baseVal.width || 300;

/**
 * A y axis from lo to hi (labels left); returns the y of a value.
 * @param {SVGSVGElement} svgEl
 * @param {number} lo
 * @param {number} hi
 * @param {(v: number) => string} label
 * @returns {(v: number) => number}
 */
function frame(svgEl, lo, hi, label) {
  svgEl.replaceChildren(
    svg("line", { x1: 30, y1: 80, x2: widthOf(svgEl) - 4, y2: 80, stroke: "#d5d9e0" }),
    svg("text", { x: 27, y: 13, "text-anchor": "end", text: label(hi) }),
    svg("text", { x: 27, y: 82, "text-anchor": "end", text: label(lo) }),
  );
  return (v) => 80 - (hi > lo ? (70 * (Math.min(hi, Math.max(lo, v)) - lo)) / (hi - lo) : 35);
}

/**
 * A dashed line at a target or gate, drawn over the data.
 * @param {SVGSVGElement} svgEl
 * @param {(v: number) => number} y
 * @param {number} value
 * @param {string} text
 */
function guide(svgEl, y, value, text) {
  const line = svg("line", {
    x1: 30,
    y1: y(value),
    x2: widthOf(svgEl) - 4,
    y2: y(value),
    stroke: cssVar("branch"),
    "stroke-dasharray": "3 3",
    class: "guide",
  });
  line.append(svg("title", { text }));
  svgEl.append(line);
}

function renderAgreement() {
  const points = reports.agreement;
  $("#agreement-empty").hidden = points.length > 0;
  const harnesses = [...new Set(points.flatMap((p) => p.harnesses.map((h) => h.harness)))].sort((a, b) =>
    a === "*" ? -1 : b === "*" ? 1 : a.localeCompare(b),
  );
  const colour = new Map(harnesses.map((h, i) => [h, PALETTE[i % PALETTE.length]]));
  const legend = $("#agreement-legend");
  legend.replaceChildren(...harnesses.map((h) => legendKey(colour.get(h) ?? "#888", harnessName(h))));
  const latest = points.at(-1);
  const all = latest?.harnesses.find((h) => h.harness === "*");
  $("#agreement-latest").textContent =
    latest && all
      ? `latest report, all harnesses (${clock(latest.at)}, batch ${latest.batchId}, ${all.tokens} tokens): ` +
        `r ${fixed4(all.pearson)} · p99 |Δlogp| ${small(all.absDiffP99)} · k3 KL ${small(all.k3Kl)}`
      : "";
  const t0 = points.length ? points[0].at : 0;
  const t1 = latest ? latest.at : 1;
  /** @param {number} t */
  const x = (t) => (t1 > t0 ? 30 + (266 * (t - t0)) / (t1 - t0) : 163);
  /** @param {"pearson" | "absDiffP99" | "k3Kl"} key */
  const series = (key) =>
    harnesses.map((h) => ({
      harness: h,
      points: points
        .map((p) => ({ p, f: p.harnesses.find((f) => f.harness === h) }))
        .filter(
          /** @returns {pf is { p: AgreementPoint, f: Figures }} */
          (pf) => pf.f !== undefined && pf.f[key] !== null && pf.f[key] !== undefined,
        ),
    }));
  /**
   * @param {string} id
   * @param {"pearson" | "absDiffP99" | "k3Kl"} key
   * @param {string} what
   * @param {number} lo
   * @param {number} hi
   * @param {(v: number | null) => string} label
   * @param {number} [target]
   * @param {(v: number) => string} [axis]
   */
  const chart = (id, key, what, lo, hi, label, target, axis = label) => {
    const svgEl = svgOf(id);
    const y = frame(svgEl, lo, hi, axis);
    if (points.length) {
      svgEl.append(svg("text", { x: 30, y: 89, text: clock(t0) }));
      if (t1 > t0) svgEl.append(svg("text", { x: 296, y: 89, "text-anchor": "end", text: clock(t1) }));
    }
    // Per harness first, thin; all harnesses last, on top.
    for (const s of series(key).reverse()) {
      const c = colour.get(s.harness) ?? "#888";
      const whole = s.harness === "*";
      const xy = s.points.map(({ p, f }) => [x(p.at), y(/** @type {number} */ (f[key]))]);
      if (xy.length > 1)
        svgEl.append(
          svg("polyline", {
            points: xy.map((q) => q.join(",")).join(" "),
            fill: "none",
            stroke: c,
            "stroke-width": whole ? 2 : 1.25,
          }),
        );
      s.points.forEach(({ p, f }, i) => {
        const [cx, cy] = /** @type {number[]} */ (xy[i]);
        const dot = svg("circle", { cx, cy, r: whole ? 3 : 2, fill: c, class: "agreement-point" });
        dot.append(
          svg("title", {
            text: `${harnessName(s.harness)}: ${what} ${label(f[key])}\nbatch ${p.batchId} from ${p.core}, ${f.tokens} tokens, ${clock(p.at)}`,
          }),
        );
        svgEl.append(dot);
      });
    }
    if (target !== undefined && target > lo && target < hi) guide(svgEl, y, target, `${what} ${target}`);
    if (!points.length) svgEl.append(svg("text", { x: 163, y: 48, "text-anchor": "middle", text: "no report yet" }));
  };
  /** @param {"pearson" | "absDiffP99" | "k3Kl"} key */
  const values = (key) =>
    points.flatMap((p) => p.harnesses.map((h) => h[key])).filter(/** @returns {v is number} */ (v) => v !== null);
  chart("#chart-pearson", "pearson", "r", Math.min(0.98, ...values("pearson")), 1, fixed4, 0.99, (v) => v.toFixed(3));
  chart("#chart-p99", "absDiffP99", "p99 |Δlogp|", 0, Math.max(0.05, ...values("absDiffP99")), small);
  chart("#chart-k3", "k3Kl", "k3 KL", 0, Math.max(1e-3, ...values("k3Kl")), small);
}

// ---------- replay runs ----------
function renderReplays() {
  const body = $("#replay-table tbody");
  body.replaceChildren(
    ...[...reports.replays].reverse().map((run) =>
      el(
        "tr",
        {
          "data-id": String(run.id),
          class: reports.selectedReplay === run.id ? "selected" : "",
          title: `${run.source}; ${run.selection}; ${run.completions} completions scored, ${run.skipped} skipped, ${run.errors} errors`,
          onclick: () => void selectReplay(run.id),
        },
        el("td", { text: when(run.at) }),
        el("td", { title: run.upstream, text: run.upstream.replace(/^https?:\/\//, "") }),
        el("td", { class: "n", text: String(run.rollouts) }),
        el("td", { class: "n", text: String(run.completions) }),
        el("td", { class: "n", text: fixed4(run.overall.pearson) }),
        el("td", { class: "n", text: small(run.overall.absDiffP99) }),
        el("td", { class: "n", text: small(run.overall.absDiffMax) }),
        el(
          "td",
          {},
          el("span", {
            class: `verdict ${run.verdict}`,
            text:
              run.verdict === "ok"
                ? run.maxP99 === null
                  ? "scored"
                  : `ok ≤ ${run.maxP99}`
                : run.verdict === "drift"
                  ? `drift > ${run.maxP99}`
                  : "error",
          }),
        ),
      ),
    ),
  );
  $("#replays-empty").hidden = reports.replays.length > 0;
}

/** @param {number} id */
async function selectReplay(id) {
  reports.selectedReplay = id;
  renderReplays();
  try {
    const run = await api(`/api/replays/${id}`);
    if (reports.selectedReplay === id) {
      reports.drift = run;
      renderDrift();
    }
  } catch {
    // gone (pruned) or the link dropped: the table still shows the run
  }
}

function renderDrift() {
  const run = reports.drift;
  if (!run) return;
  const svgEl = svgOf("#chart-drift");
  // The dashed line is the gate the verdict used (--max-p99), else the threshold of the first drifted token.
  const gate = run.maxP99 ?? run.threshold;
  const gateText = run.maxP99 === null ? `--threshold ${run.threshold}` : `--max-p99 ${run.maxP99}`;
  $("#drift-title").replaceChildren(
    `per-call drift, run of ${when(run.at)} `,
    el("span", { class: "hint", text: `p99 |Δlogp| per scored completion · dashed: ${gateText}` }),
  );
  const calls = run.calls ?? [];
  const hi = Math.max(gate * 1.2, 0.05, ...calls.map((c) => c.absDiffP99 ?? 0));
  const y = frame(svgEl, 0, hi, small);
  const w = (widthOf(svgEl) - 34) / Math.max(calls.length, 1);
  calls.forEach((c, i) => {
    const v = c.absDiffP99 ?? 0;
    const bar = svg("rect", {
      x: 30 + i * w + (w > 3 ? 0.5 : 0),
      y: y(v),
      width: Math.max(0.8, w - (w > 3 ? 1 : 0)),
      height: 80 - y(v),
      fill: v > gate ? cssVar("reserialization") : cssVar("compaction"),
      class: "drift-bar",
    });
    bar.append(
      svg("title", {
        text: `${c.rolloutId} call ${c.callSeq}${c.choiceIndex ? `.${c.choiceIndex}` : ""} (${c.harness}): p99 |Δlogp| ${small(c.absDiffP99)}, max ${small(c.absDiffMax)}, r ${fixed4(c.pearson)}, ${c.tokens} tokens`,
      }),
    );
    svgEl.append(bar);
  });
  guide(svgEl, y, gate, gateText);
  svgEl.append(svg("text", { x: 30, y: 89, text: `${calls.length} completions, in rollout and call order` }));
  if (!calls.length) svgEl.append(svg("text", { x: 163, y: 48, "text-anchor": "middle", text: "nothing scored" }));
}
