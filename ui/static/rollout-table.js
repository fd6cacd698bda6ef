// @ts-check
// The rollouts table: the page the server gave (rollout-list.js), "flagged only" narrowing it to rows whose
// reconstruction is flagged, the pager (which rollouts of how many) and the header's counts.
import { $, breakCount, breakTitle, el, fmt, input, shortId } from "./dom.js";
import { state } from "./state.js";

/** @typedef {import("./types.js").Row} Row */

/** What a click on a row does (the page wires it: open the rollout). */
const handlers = { select: /** @param {string} _id */ (_id) => {} };

/** @param {(id: string) => void} select */
export function onRowClick(select) {
  handlers.select = select;
}

/** @param {Row} row */
function shown(row) {
  return !input("#flagged-only").checked || Boolean(row.summary?.flags?.flagged);
}

// Rows drawn before, kept while what they show is unchanged: a row redrawn under the pointer would swallow a click in
// progress (its press and release would land on different elements).
/** @type {Map<string, { signature: string, tr: HTMLTableRowElement }>} */
let drawn = new Map();

/** @param {Row} row */
function rowElement(row) {
  const signature = JSON.stringify([row.record, row.calls, row.summary, state.selected === row.record.id]);
  const before = drawn.get(row.record.id);
  if (before && before.signature === signature && !row.fresh) return before.tr;
  const tr = newRowElement(row);
  drawn.set(row.record.id, { signature, tr });
  return tr;
}

/** @param {Row} row */
function newRowElement(row) {
  const r = row.record;
  const s = row.summary?.stats;
  const flags = row.summary?.flags;
  const breaks = s ? breakCount(s.breaks) : null;
  const tr = el(
    "tr",
    {
      "data-id": r.id,
      class: [state.selected === r.id ? "selected" : "", row.fresh ? "fresh" : ""].join(" ").trim(),
      onclick: () => handlers.select(r.id),
    },
    el("td", { class: "id", title: r.id, text: shortId(r.id) }),
    el("td", { title: r.group || "", text: r.group ?? "—" }),
    el("td", { title: r.harness || "", text: r.harness ?? "—" }),
    el("td", {}, el("span", { class: `status ${r.status}`, text: r.status })),
    el("td", { class: "n", text: r.reward === null || r.reward === undefined ? "—" : fmt(r.reward, 2) }),
    el("td", { class: "n", text: String(row.calls) }),
    el("td", { class: "n", text: row.summary ? String(row.summary.trajectories) : "…" }),
    el("td", {
      class: `n ${breaks ? "warn" : ""}`,
      text: s ? String(breaks) : "…",
      title: s ? breakTitle(s.breaks) : "",
    }),
    el("td", {
      class: `n ${s && s.amplification > 1.1 ? "warn" : ""}`,
      text: s ? (s.uniqueTokens ? fmt(s.amplification, 2) : "—") : "…",
    }),
    el("td", {
      class: flags?.flagged ? "flag" : "",
      title: flags?.reasons?.join("; ") || "",
      text: flags ? (flags.flagged ? `⚑ ${flags.reasons[0] || "flagged"}` : "") : "",
    }),
  );
  row.fresh = false;
  return tr;
}

/** Rollouts per second over the last ten seconds of live calls. */
function callRate() {
  const since = Date.now() - 10_000;
  state.callTimes = state.callTimes.filter((t) => t >= since);
  return state.callTimes.length / 10;
}

function renderPager() {
  const first = state.cursors.reduce((n, page) => n + page.rows, 0);
  const count = state.rows.size;
  $("#page-info").textContent = count
    ? `${(first + 1).toLocaleString()}–${(first + count).toLocaleString()} of ${state.total.toLocaleString()}`
    : `0 of ${state.total.toLocaleString()}`;
  input("#page-newer").disabled = state.cursors.length === 0;
  input("#page-older").disabled = !state.nextCursor;
}

let queued = false;
/** Renders on the next frame (many events in a burst render once). */
export function renderRollouts() {
  if (queued) return;
  queued = true;
  requestAnimationFrame(() => {
    queued = false;
    const rows = [...state.rows.values()]
      .filter(shown)
      .sort((a, b) => (b.record.createdAt || 0) - (a.record.createdAt || 0));
    const kept = drawn;
    drawn = new Map();
    const trs = rows.map((row) => {
      const before = kept.get(row.record.id);
      if (before) drawn.set(row.record.id, before);
      return rowElement(row);
    });
    $("#rollouts tbody").replaceChildren(...trs);
    $("#rollouts-empty").hidden = state.total > 0 || Boolean(state.query || state.status);
    renderPager();
    const one = state.total === 1;
    const searched = state.query || state.status ? (one ? " matches" : " match") : "";
    $("#counters").textContent =
      `${state.total.toLocaleString()} rollout${one ? "" : "s"}${searched} · ` +
      `${state.open.toLocaleString()} open · ${callRate()} calls/s`;
  });
}
