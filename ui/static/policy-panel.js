// @ts-check
// Weight updates as the gateway sees them (docs/weight-updates.md): the policy version the upstreams serve, whether
// they are paused (in which mode, since when, until when at the latest), the calls held now, and since the gateway
// started the pauses, the calls held and how long they waited (GET /api/policy, and /metrics' rlgate_policy_*).
import { api, metrics } from "./api.js";
import { $, clock, el } from "./dom.js";

/** @typedef {import("./types.js").PolicyState} PolicyState */

const held = "rlgate_policy_held_calls_total";
const holdSum = "rlgate_policy_hold_seconds_sum";
const holdCount = "rlgate_policy_hold_seconds_count";
const continued = "rlgate_policy_continued_answers_total";

/** @param {number} s */
const seconds = (s) => (s >= 10 ? `${s.toFixed(0)} s` : s >= 0.1 ? `${s.toFixed(2)} s` : `${(s * 1000).toFixed(1)} ms`);

/** Reads the state and draws it; a gateway without weight updates shows its version and "running". */
export async function loadPolicy() {
  /** @type {PolicyState} */
  const state = await api("/api/policy");
  const figures = await metrics().catch(() => new Map());
  const heldCalls = figures.get(held);
  const waited = figures.get(holdSum);
  const waits = figures.get(holdCount);
  const panel = $("#policy");
  panel.dataset.paused = String(state.paused);
  panel.dataset.version = state.version ?? "";
  panel.className = `policy ${state.paused ? "paused" : "running"}`;
  const parts = [
    el("span", { class: "policy-state" }, state.paused ? `paused (${state.mode})` : "serving"),
    el("span", {}, "policy ", el("b", { text: state.version ?? "—" })),
    state.paused && state.pausedAt
      ? el("span", {
          text: `since ${clock(state.pausedAt)}${state.resumesAt ? `, resumes by ${clock(state.resumesAt)}` : ""}`,
        })
      : null,
    el("span", { class: "policy-holding" }, "holding ", el("b", { text: String(state.holding) })),
    el("span", { class: "policy-pauses" }, "pauses ", el("b", { text: String(state.pauses) })),
    heldCalls === undefined
      ? null
      : el(
          "span",
          { class: "policy-held", title: "calls held by pauses since the gateway started, and their mean wait" },
          "held ",
          el("b", { text: String(heldCalls) }),
          waits ? ` · wait ${seconds((waited ?? 0) / waits)} mean, ${seconds(waited ?? 0)} total` : "",
        ),
    figures.get(continued) ? el("span", {}, "continued ", el("b", { text: String(figures.get(continued)) })) : null,
  ];
  panel.replaceChildren(...parts.filter((part) => part !== null));
}
