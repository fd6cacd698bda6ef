// @ts-check
// The reconstruction's figures of each row (trajectories, breaks, amplification, flags), read after a rollout
// changes, two at a time, so a burst of calls costs a few reads and not one per call.
import { api } from "./api.js";
import { state } from "./state.js";

/** @typedef {import("./types.js").Reconstruction} Reconstruction */

const AFTER_CHANGE_MS = 400;
const AT_ONCE = 2;
const pending = new Set();
let reading = 0;
/** @type {(rec: Reconstruction) => void} */
let listener = () => {};

/** @param {(rec: Reconstruction) => void} fn called with each reconstruction read */
export function onSummary(fn) {
  listener = fn;
}

/** @param {string} id a rollout whose figures changed */
export function markStale(id) {
  pending.add(id);
  setTimeout(pump, AFTER_CHANGE_MS);
}

function pump() {
  while (reading < AT_ONCE && pending.size) {
    const id = /** @type {string} */ (pending.values().next().value);
    pending.delete(id);
    reading++;
    api(`/api/rollouts/${encodeURIComponent(id)}/trajectories`)
      .then(
        /** @param {Reconstruction} rec */ (rec) => {
          const row = state.rows.get(id);
          if (row) row.summary = { stats: rec.stats, flags: rec.flags, trajectories: rec.trajectories.length };
          listener(rec);
        },
        () => {},
      )
      .finally(() => {
        reading--;
        if (pending.size) setTimeout(pump, 50);
      });
  }
}
