// @ts-check
// One rollout opened: its facts and a link to it, its prefix tree, and what a click on a box of the tree shows (that
// leaf's trajectory, or the first one through an inner call, and the call in the inspector).
import { api } from "./api.js";
import { $, breakTitle, el, fmt, svgOf } from "./dom.js";
import { inspect } from "./inspector.js";
import { rolloutLink, showRolloutInAddress } from "./rollout-link.js";
import { state } from "./state.js";
import { showTokens } from "./tokens.js";
import { drawTree, onNodeClick } from "./tree.js";

/** @typedef {import("./types.js").Reconstruction} Reconstruction */
/** @typedef {import("./types.js").Rollout} Rollout */

/** The selected rollout's record when it is not a row of the page (opened by its link). */
let outsideRecord = /** @type {Rollout | null} */ (null);

/** What changes in the table when another rollout is selected (the page wires it). */
const handlers = { selected: () => {} };

/** @param {() => void} fn */
export function onSelected(fn) {
  handlers.selected = fn;
}

/**
 * Opens rollout `id` (and puts it in the address: a link to it).
 * @param {string} id
 */
export async function select(id) {
  state.selected = id;
  state.treeShape = null;
  state.selectedNode = null;
  state.trajectoryId = null;
  outsideRecord = null;
  showRolloutInAddress(id);
  handlers.selected();
  $("#detail").hidden = false;
  // The previous rollout's tree goes at once: nothing of it may be clicked while this one loads.
  svgOf("#tree").replaceChildren();
  $("#tree-legend").replaceChildren();
  $("#detail-head").replaceChildren(el("p", { class: "empty", text: `loading ${id}…` }));
  $("#tokens-title").textContent = "tokens";
  $("#inspector-title").textContent = "call";
  $("#tokens").replaceChildren(
    el("p", { class: "empty", text: "Click a leaf of the tree (or any call) to see its trajectory's tokens." }),
  );
  $("#inspector-body").replaceChildren(el("p", { class: "empty", text: "Click a call in the tree to inspect it." }));
  try {
    const path = `/api/rollouts/${encodeURIComponent(id)}`;
    const [record, rec] = await Promise.all([state.rows.has(id) ? null : api(path), api(`${path}/trajectories`)]);
    if (state.selected !== id) return;
    outsideRecord = record;
    showDetail(rec);
  } catch (error) {
    if (state.selected !== id) return;
    const message = /** @type {Error} */ (error).message;
    $("#detail-head").replaceChildren(el("p", { class: "flag", text: `cannot load ${id}: ${message}` }));
  }
}

/**
 * Shows a reconstruction of the selected rollout (again, when it changed).
 * @param {Reconstruction} rec
 */
export function showDetail(rec) {
  if (rec.rolloutId !== state.selected) return;
  state.detail = rec;
  const r = state.rows.get(rec.rolloutId)?.record ?? outsideRecord;
  const s = rec.stats;
  const breaks = breakTitle(s.breaks);
  $("#detail-head").replaceChildren(
    el(
      "h2",
      {},
      "rollout ",
      el("span", { class: "id", text: rec.rolloutId }),
      " ",
      el("a", { class: "link", href: rolloutLink(rec.rolloutId), title: "a link to this rollout", text: "link" }),
    ),
    el(
      "div",
      { class: "facts" },
      el("span", {}, "status ", el("b", { text: r?.status ?? "—" })),
      el("span", {}, "reward ", el("b", { text: r?.reward ?? "—" })),
      el("span", {}, "group ", el("b", { text: r?.group ?? "—" })),
      el("span", {}, "harness ", el("b", { text: r?.harness ?? "—" })),
      el("span", {}, "calls ", el("b", { text: String(s.calls) })),
      el(
        "span",
        {},
        "trajectories ",
        el("b", { text: `${s.retainedTrajectories} trained` }),
        s.untrainedTrajectories ? ` + ${s.untrainedTrajectories} untrained` : "",
      ),
      el("span", {}, "dead leaves ", el("b", { text: String(s.deadLeaves) })),
      el("span", {}, "breaks ", el("b", { text: breaks })),
      el("span", {}, "tokens ", el("b", { text: `${s.uniqueTokens} unique, ${s.trainedTokens} trained` })),
      el("span", {}, "amplification ", el("b", { text: fmt(s.amplification, 3) })),
      rec.flags.flagged ? el("span", { class: "flag", text: `⚑ flagged: ${rec.flags.reasons.join("; ")}` }) : null,
      rec.flags.ephemeralContextLeaves
        ? el("span", {
            class: "note",
            "data-note": "ephemeral_context",
            text: `ephemeral context (expected): ${rec.flags.ephemeralContextLeaves} calls ended with a context message the next call moved behind its answer; each is its own trajectory, trained once, not counted against the leaf limit`,
          })
        : null,
    ),
  );
  // Redraw the tree only when it changed: a redraw under the pointer would swallow a click in progress.
  const shape = JSON.stringify([
    rec.calls,
    rec.trajectories.map((t) => [t.trajectoryId, t.tokenIds.length]),
    rec.stats,
  ]);
  if (shape === state.treeShape) return;
  state.treeShape = shape;
  drawTree(rec);
  const t = state.trajectoryId && rec.trajectories.find((x) => x.trajectoryId === state.trajectoryId);
  if (t) void showTokens(t);
}

/** @param {import("./tree.js").TreeNode} node */
function onNode(node) {
  const rec = state.detail;
  if (!rec) return;
  state.selectedNode = { key: node.key, callSeq: node.call.callSeq };
  // A leaf shows its own trajectory; an inner call the first trajectory its tokens lie on.
  const t = node.leaf?.t || rec.trajectories.find((x) => x.spans.some((s) => s.callSeq === node.call.callSeq)) || null;
  drawTree(rec);
  void inspect(node.call.callSeq);
  if (t) void showTokens(t, node.call.callSeq);
  else
    $("#tokens").replaceChildren(
      el("p", {
        class: "empty",
        text:
          node.choice?.fate === "dead"
            ? "A dead leaf: a later call retried the same prompt, so this answer is not trained and is in no trajectory."
            : "This call's tokens are in no trajectory.",
      }),
    );
}

onNodeClick(onNode);
