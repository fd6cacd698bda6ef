// @ts-check
// The table's rollouts, from the server: a page of PAGE_SIZE, newest first, of the rollouts that match the search
// shown (text and status: the server searches the whole store), the pages after and before it by cursor, and the
// store's counts. Live events update the rows of the page, and add a new rollout to the newest page when it matches.
import { api } from "./api.js";
import { onFirstPage, state } from "./state.js";

/** @typedef {import("./types.js").Rollout} Rollout */
/** @typedef {import("./types.js").RolloutPage} RolloutPage */

const PAGE_SIZE = 200;

// A load answered after a later one started is dropped: the page shows the latest search.
let generation = 0;

/** @param {string | null} cursor */
function pageUrl(cursor) {
  const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (state.query) params.set("q", state.query);
  if (state.status) params.set("status", state.status);
  if (cursor) params.set("cursor", cursor);
  return `/api/rollouts?${params}`;
}

/**
 * Loads the page after `cursor` (null: the newest) into the table; its rollouts, or null when a later load won.
 * @param {string | null} cursor
 * @returns {Promise<Rollout[] | null>}
 */
async function loadPage(cursor) {
  const mine = ++generation;
  /** @type {RolloutPage} */
  const page = await api(pageUrl(cursor));
  if (mine !== generation) return null;
  const rows = new Map();
  for (const r of page.rollouts)
    rows.set(r.id, { record: r, calls: r.calls, summary: state.rows.get(r.id)?.summary ?? null });
  state.rows = rows;
  state.total = page.total;
  state.nextCursor = page.nextCursor;
  return page.rollouts;
}

/** The page shown again (after a reconnect, or a search), from the newest when `fromNewest`. */
export async function reloadPage(fromNewest = false) {
  if (fromNewest) state.cursors = [];
  const [rollouts] = await Promise.all([loadPage(state.cursors.at(-1)?.cursor ?? null), countOpen()]);
  return rollouts;
}

/** The next (older) page. */
export async function olderPage() {
  const cursor = state.nextCursor;
  if (!cursor) return null;
  const rows = state.rows.size;
  const rollouts = await loadPage(cursor);
  if (rollouts) state.cursors.push({ cursor, rows });
  return rollouts;
}

/** The page before (newer). */
export async function newerPage() {
  if (onFirstPage()) return null;
  const cursors = state.cursors.slice(0, -1);
  const rollouts = await loadPage(cursors.at(-1)?.cursor ?? null);
  if (rollouts) state.cursors = cursors;
  return rollouts;
}

/** Open rollouts in the store (a count the server makes from its index). */
export async function countOpen() {
  /** @type {RolloutPage} */
  const page = await api("/api/rollouts?status=open&limit=1");
  state.open = page.total;
}

/**
 * Whether a rollout matches the search shown: the server's rule (store/rollout-search.ts).
 * @param {Rollout} r
 */
export function matchesSearch(r) {
  if (state.status && r.status !== state.status) return false;
  const query = state.query.toLowerCase();
  if (!query) return true;
  return [r.id, r.group, r.harness, r.task, r.status].some((v) => v && String(v).toLowerCase().includes(query));
}

/**
 * A rollout event (created or finished): a row of the page follows it, the counts follow it, and a new rollout that
 * matches the search is shown on the newest page. Returns whether the rows changed.
 * @param {Rollout} record
 */
export function applyRolloutEvent(record) {
  const row = state.rows.get(record.id);
  const finished = record.finishedAt !== null && record.finishedAt !== undefined;
  // A finish was of an open rollout; the counts follow whether it matched the search before and after.
  const before = row ? row.record : finished ? { ...record, status: "open" } : null;
  if (finished && before?.status === "open") state.open = Math.max(0, state.open - 1);
  if (!finished) state.open++;
  state.total += Number(matchesSearch(record)) - Number(before ? matchesSearch(before) : false);
  if (row) {
    row.record = { ...row.record, ...record };
    row.fresh = true;
    return true;
  }
  if (finished || !matchesSearch(record) || !onFirstPage()) return false;
  state.rows.set(record.id, { record: { ...record, calls: record.calls ?? 0 }, calls: 0, summary: null, fresh: true });
  return true;
}

/**
 * A call event: its row's count follows. Returns the row's id when the page shows it.
 * @param {import("./types.js").CallEvent} call
 */
export function applyCallEvent(call) {
  const row = call.rolloutId ? state.rows.get(call.rolloutId) : undefined;
  if (!row) return null;
  row.calls++;
  row.fresh = true;
  return row.record.id;
}
