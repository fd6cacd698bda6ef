// @ts-check
// rlgate's live page: the rollouts in the store (searched and paged by the server) as they happen, one rollout's
// prefix tree, tokens and calls, charts of the run from the store, weight updates, and the agreement and replay
// panels. Plain JavaScript modules and SVG: nothing to build, nothing to download; the gateway serves them as files.
// This module wires the panels together: the event stream, the token form, the search box and pager, the address.
import { auth, Unauthorized } from "./api.js";
import { $, input } from "./dom.js";
import { select, showDetail, onSelected } from "./detail.js";
import { loadPolicy } from "./policy-panel.js";
import { loadReports, reportEvent } from "./reports.js";
import { renderRolloutCharts } from "./rollout-charts.js";
import { rolloutInAddress, takeTokenFromAddress } from "./rollout-link.js";
import { applyCallEvent, applyRolloutEvent, newerPage, olderPage, reloadPage } from "./rollout-list.js";
import { onRowClick, renderRollouts } from "./rollout-table.js";
import { loadSeries, seriesChanged, tickSeries } from "./series-charts.js";
import { state } from "./state.js";
import { connect } from "./stream.js";
import { markStale, onSummary } from "./summaries.js";
import { wireTokenView } from "./tokens.js";

const TICK_MS = 2000;
/** Rows of a page whose reconstruction figures are read at once. */
const SUMMARIES_PER_PAGE = 60;
const SEARCH_DELAY_MS = 250;

/** @param {string} [message] */
function askToken(message) {
  $("#token-form").hidden = false;
  $("#token-error").textContent = message || "";
  $("#token-input").focus();
}

/**
 * @param {boolean} live
 * @param {string} [text]
 */
function setConnected(live, text) {
  const conn = $("#conn");
  conn.className = `conn ${live ? "on" : "off"}`;
  conn.textContent = text || (live ? "live" : "disconnected");
}

/** @param {import("./types.js").Rollout[] | null} rollouts a page just loaded */
function showPage(rollouts) {
  if (!rollouts) return;
  for (const r of rollouts.slice(0, SUMMARIES_PER_PAGE)) markStale(r.id);
  renderRollouts();
  renderRolloutCharts();
}

/**
 * @param {string} event
 * @param {any} data
 */
function onEvent(event, data) {
  if (event === "call") {
    state.callTimes.push(Date.now());
    seriesChanged();
    const id = applyCallEvent(data);
    if (id) markStale(id);
    renderRollouts();
  } else if (event === "rollout") {
    if (data.finishedAt) seriesChanged();
    if (applyRolloutEvent(data)) markStale(data.id);
    renderRollouts();
  } else if (event === "agreement" || event === "replay") reportEvent(event, data);
}

/** Loads what the page shows (again after a reconnect: events may have been missed), then follows the stream. */
async function start() {
  try {
    showPage(await reloadPage());
    const linked = rolloutInAddress();
    if (linked && state.detail?.rolloutId !== linked) void select(linked);
    await Promise.all([loadSeries(), loadReports(), loadPolicy()]);
  } catch (error) {
    if (error instanceof Unauthorized) {
      setConnected(false, "needs token");
      return askToken(auth.token ? "that token was refused" : "");
    }
  }
  void connect({
    onEvent,
    onState: setConnected,
    onUnauthorized: () => askToken(auth.token ? "that token was refused" : ""),
    onReconnect: () => void start(),
  });
}

function wireControls() {
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    auth.token = input("#token-input").value.trim() || null;
    sessionStorage.setItem("rlgate-token", auth.token || "");
    $("#token-form").hidden = true;
    void start();
  });
  // The search and the status are the server's (the whole store); "flagged only" narrows the page shown.
  let searchTimer = 0;
  $("#filter").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      state.query = input("#filter").value.trim();
      reloadPage(true).then(showPage, () => {});
    }, SEARCH_DELAY_MS);
  });
  $("#status-filter").addEventListener("input", () => {
    state.status = input("#status-filter").value;
    reloadPage(true).then(showPage, () => {});
  });
  $("#flagged-only").addEventListener("input", () => renderRollouts());
  $("#page-older").addEventListener("click", () => olderPage().then(showPage, () => {}));
  $("#page-newer").addEventListener("click", () => newerPage().then(showPage, () => {}));
  $("#series-window").addEventListener("input", () => void loadSeries());
  onRowClick((id) => void select(id));
  onSelected(renderRollouts);
  onSummary((rec) => {
    if (state.selected === rec.rolloutId) showDetail(rec);
    renderRollouts();
    renderRolloutCharts();
  });
  wireTokenView();
  // A link to a rollout (#rollout=ID) opens it, also when the address changes (back, forward, a pasted link).
  addEventListener("hashchange", () => {
    const id = rolloutInAddress();
    if (id && id !== state.selected) void select(id);
  });
}

(function boot() {
  const fromAddress = takeTokenFromAddress();
  if (fromAddress) sessionStorage.setItem("rlgate-token", fromAddress);
  auth.token = sessionStorage.getItem("rlgate-token") || null;
  wireControls();
  setInterval(() => {
    tickSeries();
    renderRollouts();
    loadPolicy().catch(() => {});
  }, TICK_MS);
  void start();
})();
