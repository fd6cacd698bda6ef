// The live page's quality panels: training–inference agreement as RL cores report it (one point per trainer logprob
// report, a line per harness) and `rlgate replay score` runs (a table, and the per-call drift of the selected run).
// Loaded after app.js, whose helpers (api, el, svg, cssVar, $) it uses; app.js hands it the `agreement` and
// `replay` events of /api/events and asks it to load on every (re)connect, through globalThis.rlgateReports.
"use strict";

const PALETTE = ["#1d2330", "#2f6fdb", "#e07a10", "#138a8a", "#8a4fd1", "#d23c3c", "#a07a1c", "#7d8592"];
const MAX_POINTS = 2000;
const reports = { agreement: [], replays: [], selectedReplay: null, drift: null };

const small = (v) =>
  v === null || v === undefined || Number.isNaN(v)
    ? "—"
    : v !== 0 && Math.abs(v) < 0.01
      ? Number(v).toExponential(1)
      : Number(v).toFixed(Math.abs(v) >= 10 ? 1 : 3);
const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour12: false });
const when = (ms) => {
  const d = new Date(ms);
  return `${d.toLocaleDateString([], { month: "short", day: "numeric" })} ${clock(ms)}`;
};
const harnessName = (h) => (h === "*" ? "all harnesses" : h);

async function loadReports() {
  try {
    const [{ points }, { replays }] = await Promise.all([
      api(`/api/agreement?limit=${MAX_POINTS}`),
      api("/api/replays?limit=100"),
    ]);
    reports.agreement = points;
    reports.replays = replays;
    renderAgreement();
    renderReplays();
    if (!reports.selectedReplay && replays.length) selectReplay(replays[replays.length - 1].id);
  } catch {
    // the rollouts' loader asks for a token or reconnects; these panels follow it
  }
}

function reportEvent(event, value) {
  if (event === "agreement") {
    reports.agreement.push(value);
    if (reports.agreement.length > MAX_POINTS) reports.agreement.splice(0, reports.agreement.length - MAX_POINTS);
    renderAgreement();
  } else if (event === "replay") {
    reports.replays.push(value);
    renderReplays();
    selectReplay(value.id); // the newest run is the one someone is looking for
  }
}

// ---------- agreement ----------
/** A y axis from lo to hi (labels left), a faint line at `guide` (a target), and the time range below. */
function frame(svgEl, lo, hi, label, guide) {
  const y = (v) => 80 - (hi > lo ? (70 * (v - lo)) / (hi - lo) : 35);
  svgEl.replaceChildren(
    svg("line", { x1: 30, y1: 80, x2: 296, y2: 80, stroke: "#d5d9e0" }),
    svg("text", { x: 27, y: 13, "text-anchor": "end", text: label(hi) }),
    svg("text", { x: 27, y: 82, "text-anchor": "end", text: label(lo) }),
  );
  if (guide !== undefined && guide > lo && guide < hi)
    svgEl.append(
      svg("line", { x1: 30, y1: y(guide), x2: 296, y2: y(guide), stroke: cssVar("branch"), "stroke-dasharray": "3 3" }),
    );
  return y;
}

function renderAgreement() {
  const points = reports.agreement;
  $("#agreement-empty").hidden = points.length > 0;
  const harnesses = [...new Set(points.flatMap((p) => p.harnesses.map((h) => h.harness)))].sort((a, b) =>
    a === "*" ? -1 : b === "*" ? 1 : a.localeCompare(b),
  );
  const colour = new Map(harnesses.map((h, i) => [h, PALETTE[i % PALETTE.length]]));
  const legend = $("#agreement-legend");
  legend.replaceChildren(
    ...harnesses.map((h) =>
      el("span", { class: "key" }, el("i", { class: "sw", style: `background:${colour.get(h)}` }), harnessName(h)),
    ),
  );
  const last = points.at(-1)?.harnesses.find((h) => h.harness === "*");
  if (last)
    legend.append(
      el("span", {
        class: "latest",
        text: ` · latest (${clock(points.at(-1).at)}, batch ${points.at(-1).batchId}): r ${small(last.pearson)}, p99 ${small(last.absDiffP99)}, k3 ${small(last.k3Kl)}`,
      }),
    );
  const t0 = points.length ? points[0].at : 0;
  const t1 = points.length ? points.at(-1).at : 1;
  const x = (t) => (t1 > t0 ? 30 + (266 * (t - t0)) / (t1 - t0) : 163);
  const series = (key) =>
    harnesses.map((h) => ({
      harness: h,
      points: points
        .map((p) => ({ p, f: p.harnesses.find((f) => f.harness === h) }))
        .filter(({ f }) => f && f[key] !== null && f[key] !== undefined),
    }));
  const chart = (id, key, what, lo, hi, guide) => {
    const svgEl = $(id);
    const y = frame(svgEl, lo, hi, small, guide);
    if (points.length) {
      svgEl.append(svg("text", { x: 30, y: 89, text: clock(t0) }));
      if (t1 > t0) svgEl.append(svg("text", { x: 296, y: 89, "text-anchor": "end", text: clock(t1) }));
    }
    for (const s of series(key)) {
      const c = colour.get(s.harness);
      const xy = s.points.map(({ p, f }) => [x(p.at), y(Math.min(hi, Math.max(lo, f[key])))]);
      if (xy.length > 1)
        svgEl.append(
          svg("polyline", {
            points: xy.map((q) => q.join(",")).join(" "),
            fill: "none",
            stroke: c,
            "stroke-width": 1.5,
          }),
        );
      s.points.forEach(({ p, f }, i) => {
        const dot = svg("circle", { cx: xy[i][0], cy: xy[i][1], r: 2.5, fill: c, class: "agreement-point" });
        dot.append(
          svg("title", {
            text: `${harnessName(s.harness)}: ${what} ${small(f[key])}\nbatch ${p.batchId} from ${p.core}, ${f.tokens} tokens, ${clock(p.at)}`,
          }),
        );
        svgEl.append(dot);
      });
    }
    if (!points.length) svgEl.append(svg("text", { x: 163, y: 48, "text-anchor": "middle", text: "no report yet" }));
  };
  const values = (key) => points.flatMap((p) => p.harnesses.map((h) => h[key])).filter((v) => v !== null);
  const r = values("pearson");
  chart("#chart-pearson", "pearson", "r", Math.min(0.98, ...r), 1, 0.99);
  chart("#chart-p99", "absDiffP99", "p99 |Δlogp|", 0, Math.max(0.05, ...values("absDiffP99")));
  chart("#chart-k3", "k3Kl", "k3 KL", 0, Math.max(1e-3, ...values("k3Kl")));
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
          onclick: () => selectReplay(run.id),
        },
        el("td", { text: when(run.at) }),
        el("td", { title: run.upstream, text: run.upstream.replace(/^https?:\/\//, "") }),
        el("td", { class: "n", text: String(run.rollouts) }),
        el("td", { class: "n", text: small(run.overall.pearson) }),
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
  const svgEl = $("#chart-drift");
  const title = $("#drift-title");
  if (!run) return;
  title.replaceChildren(
    "per-call drift ",
    el("span", {
      class: "hint",
      text: `p99 |Δlogp| of each scored completion, ${when(run.at)} vs ${run.upstream.replace(/^https?:\/\//, "")}; dashed: threshold ${run.threshold}`,
    }),
  );
  const calls = run.calls;
  const hi = Math.max(run.threshold * 1.2, 0.05, ...calls.map((c) => c.absDiffP99 ?? 0));
  const y = frame(svgEl, 0, hi, small, run.threshold);
  const w = 266 / Math.max(calls.length, 1);
  calls.forEach((c, i) => {
    const v = c.absDiffP99 ?? 0;
    const bar = svg("rect", {
      x: 30 + i * w + (w > 3 ? 0.5 : 0),
      y: y(Math.min(v, hi)),
      width: Math.max(0.8, w - (w > 3 ? 1 : 0)),
      height: 80 - y(Math.min(v, hi)),
      fill: v > run.threshold ? cssVar("reserialization") : cssVar("compaction"),
      class: "drift-bar",
    });
    bar.append(
      svg("title", {
        text: `${c.rolloutId} call ${c.callSeq}${c.choiceIndex ? `.${c.choiceIndex}` : ""} (${c.harness}): p99 |Δlogp| ${small(c.absDiffP99)}, max ${small(c.absDiffMax)}, r ${small(c.pearson)}, ${c.tokens} tokens`,
      }),
    );
    svgEl.append(bar);
  });
  svgEl.append(svg("text", { x: 30, y: 89, text: `${calls.length} completions, in rollout and call order` }));
  if (!calls.length) svgEl.append(svg("text", { x: 163, y: 48, "text-anchor": "middle", text: "nothing scored" }));
}

globalThis.rlgateReports = { load: loadReports, event: reportEvent };
