// @ts-check
// One rollout's prefix tree as SVG: a box per call's completion, laid out left to right in call order, one lane per
// branch; an edge joins a call to the sequence its prompt continues, breaks are dashed and labelled with their kind,
// dead leaves grey, calls outside the tree red on a row of their own; trajectories are the leaves, T1, T2, ….
import { $, cssVar, el, legendKey, svg, svgOf } from "./dom.js";
import { state } from "./state.js";

/** @typedef {import("./types.js").Reconstruction} Reconstruction */
/** @typedef {import("./types.js").TreeCall} TreeCall */
/** @typedef {import("./types.js").TreeChoice} TreeChoice */
/** @typedef {import("./types.js").Segment} Segment */
/** @typedef {import("./types.js").Trajectory} Trajectory */

/**
 * @typedef {object} TreeNode
 * @property {string} key
 * @property {TreeCall} call
 * @property {TreeChoice | null} choice
 * @property {number} col
 * @property {number} lane
 * @property {string} [kind]
 * @property {TreeNode | null} [parent]
 * @property {Segment} [segment]
 * @property {{ t: Trajectory, n: number } | null} [leaf]
 */

const BREAK_KINDS = ["reserialization", "retry", "sub_agent", "compaction", "branch"];
/** @type {Record<string, string>} */
const BREAK_TEXT = {
  reserialization: "history re-serialized (the prompt left an earlier completion)",
  retry: "retry: same prompt again, the earlier answer is a dead leaf",
  sub_agent: "sub-agent: another system prompt",
  compaction: "compaction: a new thread from a summary",
  branch: "branch: history edited",
};
// Why a break happened, where the ids tell (trajectory/types.ts BreakCause).
/** @type {Record<string, string>} */
const CAUSE_TEXT = {
  reasoning_dropped: "the earlier turn is rendered without its reasoning",
  context_changed: "the harness changed context it wrote itself",
  ephemeral_context:
    "ephemeral context: the harness moved the context message it had put last behind the answer (OpenClaw) — expected; each call is its own trajectory in the agent's segment, trained once",
};
const SEGMENT_TEXT = {
  main: "main agent",
  sub_agent: "sub-agent",
  compaction: "compaction",
  auxiliary: "auxiliary (side call)",
};

/** What a click on a box does (the page wires it: tokens and inspector). */
const handlers = { node: /** @param {TreeNode} _node */ (_node) => {} };

/** @param {(node: TreeNode) => void} fn */
export function onNodeClick(fn) {
  handlers.node = fn;
}

// ---------- the prefix tree ----------
/**
 * Draws `rec`'s tree and its legend.
 * @param {Reconstruction} rec
 */
export function drawTree(rec) {
  const order = rec.calls.map((c) => c.callSeq);
  /** @param {number} seq */
  const numberOf = (seq) => order.indexOf(seq) + 1;
  const segmentOf = new Map(rec.segments.map((s) => [s.id, s]));
  const leafOf = new Map(rec.trajectories.map((t, i) => [`${t.leaf.callSeq}:${t.leaf.choiceIndex}`, { t, n: i + 1 }]));
  // Nodes: every choice of every call in the tree; calls outside it (failed, no ids) on a row of their own.
  /** @type {TreeNode[]} */
  const nodes = [];
  /** @type {Map<string, TreeNode>} */
  const byKey = new Map();
  const lanesTaken = new Set();
  let nextLane = 0;
  const continued = new Set(); // parents whose lane a child already continues
  rec.calls.forEach((call, col) => {
    if (!call.attach) {
      nodes.push({ key: `${call.callSeq}:x`, call, choice: null, col, lane: -1, kind: "outside" });
      return;
    }
    for (const choice of call.choices) {
      const parentKey = call.attach.ref ? `${call.attach.ref.callSeq}:${call.attach.ref.choiceIndex}` : null;
      const parent = (parentKey && byKey.get(parentKey)) || null;
      let lane;
      if (parent && parentKey && call.attach.kind === "extend" && !continued.has(parentKey)) {
        lane = parent.lane;
        continued.add(parentKey);
      } else {
        while (lanesTaken.has(nextLane)) nextLane++;
        lane = nextLane++;
      }
      lanesTaken.add(lane);
      /** @type {TreeNode} */
      const node = {
        key: `${call.callSeq}:${choice.index}`,
        call,
        choice,
        col,
        lane,
        parent,
        segment: segmentOf.get(call.attach.segmentId),
      };
      node.leaf = leafOf.get(node.key) || null;
      nodes.push(node);
      byKey.set(node.key, node);
    }
  });
  const lanes = Math.max(1, nextLane);
  const outsideRow = nodes.some((n) => n.lane === -1) ? lanes : -1;
  /** @param {number} col */
  const X = (col) => 30 + col * 112;
  /** @param {number} lane */
  const Y = (lane) => 34 + (lane === -1 ? outsideRow : lane) * 62;
  const width = X(Math.max(1, rec.calls.length)) + 40;
  const height = Y(outsideRow === -1 ? lanes - 1 : outsideRow) + 46;
  const tree = svgOf("#tree");
  tree.setAttribute("width", String(width));
  tree.setAttribute("height", String(height));
  tree.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const edges = [];
  const labels = [];
  for (const node of nodes) {
    if (!node.parent) continue;
    const kind = /** @type {import("./types.js").Attach} */ (node.call.attach).kind;
    const isBreak = BREAK_KINDS.includes(kind);
    const x1 = X(node.parent.col) + 74,
      y1 = Y(node.parent.lane) + 14;
    const x2 = X(node.col),
      y2 = Y(node.lane) + 14;
    const mx = (x1 + x2) / 2;
    const colour = isBreak ? cssVar(kind) : "#b7bdc8";
    edges.push(
      svg("path", {
        class: `edge ${isBreak ? "break" : ""}`,
        d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`,
        stroke: colour,
        "data-kind": kind,
      }),
    );
    if (isBreak) {
      const brk = rec.breaks.find((b) => b.callSeq === node.call.callSeq);
      const cause = brk && brk.cause ? brk.cause : null;
      const label = svg("text", {
        class: "edge-label",
        x: x2 - 6,
        y: y2 - 6,
        "text-anchor": "end",
        fill: colour,
        "data-break": kind,
        ...(cause ? { "data-cause": cause } : {}),
        text: cause ? `✂ ${kind} (${cause})` : `✂ ${kind}`,
      });
      label.append(
        svg("title", {
          text: `${BREAK_TEXT[kind]}${cause ? `: ${CAUSE_TEXT[cause] || cause}` : ""}${brk ? ` — at token ${brk.at}, ${brk.oldTokens} old vs ${brk.newTokens} new tokens` : ""}`,
        }),
      );
      labels.push(label);
    }
  }
  const drawn = nodes.map((node) => {
    const x = X(node.col),
      y = Y(node.lane);
    const n = numberOf(node.call.callSeq);
    const transform = `translate(${x},${y})`;
    if (node.kind === "outside") {
      const outside = cssVar("branch");
      return box(
        node,
        { class: "node outside", transform },
        { fill: "#fff", stroke: outside, "stroke-dasharray": "3 3" },
        `#${n} ✕`,
        node.call.status !== "ok" ? node.call.status : node.call.tokenSource,
        outside,
      );
    }
    const choice = /** @type {TreeChoice} */ (node.choice);
    const dead = choice.fate === "dead";
    const fill = dead ? cssVar("dead") : cssVar(node.segment?.kind || "main");
    const selected = state.selectedNode && state.selectedNode.key === node.key;
    const g = box(
      node,
      {
        class: `node ${dead ? "dead" : ""} ${node.leaf ? "leaf" : ""} ${selected ? "selected" : ""}`,
        "data-choice": choice.index,
        "data-fate": choice.fate,
        "data-trajectory": node.leaf?.t.trajectoryId,
        transform,
      },
      {
        fill,
        stroke: node.leaf ? "#1d2330" : fill,
        "stroke-dasharray": dead ? "4 3" : null,
        "fill-opacity": dead ? 0.55 : 1,
      },
      `#${n}${node.call.choices.length > 1 ? `.${choice.index}` : ""}${dead ? " ✝" : ""}`,
      `${choice.sampledTokens} tok${dead ? " · dead" : ""}`,
    );
    g.append(svg("title", { text: nodeTitle(node, n) }));
    if (node.leaf) g.append(svg("text", { class: "leaf-label", x: 78, y: 12, text: `T${node.leaf.n}` }));
    return g;
  });
  tree.replaceChildren(...edges, ...drawn, ...labels);
  // Legend: what the colours mean, with the counts of this rollout.
  const legend = [
    ...Object.entries(SEGMENT_TEXT).map(([k, text]) => legendKey(cssVar(k), text)),
    legendKey(cssVar("dead"), `dead leaf (${rec.stats.deadLeaves})`),
    ...BREAK_KINDS.filter((k) => rec.stats.breaks[k]).map((k) =>
      legendKey(cssVar(k), `✂ ${k} (${rec.stats.breaks[k]})`),
    ),
    el(
      "span",
      { class: "key" },
      "#k: the k-th call · T1, T2…: trajectories (leaves, dark outline) · click a box for its tokens and call",
    ),
  ];
  $("#tree-legend").replaceChildren(...legend);
}
/**
 * A call's box: a group that opens it when clicked, its rectangle, its name inside and a line under it.
 * @param {TreeNode} node
 * @param {Record<string, import("./dom.js").AttrValue>} attrs
 * @param {Record<string, import("./dom.js").AttrValue>} rect
 * @param {string} label
 * @param {string} under
 * @param {string} [labelFill]
 */
function box(node, attrs, rect, label, under, labelFill) {
  return svg(
    "g",
    { ...attrs, "data-call": node.call.callSeq, onclick: () => handlers.node(node) },
    svg("rect", { width: 74, height: 28, rx: 6, ...rect }),
    svg("text", { x: 37, y: 18, "text-anchor": "middle", fill: labelFill, text: label }),
    svg("text", { class: "under", x: 37, y: 40, "text-anchor": "middle", text: under }),
  );
}

/**
 * @param {TreeNode} node
 * @param {number} n
 */
function nodeTitle(node, n) {
  const a = /** @type {import("./types.js").Attach} */ (node.call.attach);
  const choice = /** @type {TreeChoice} */ (node.choice);
  const lines = [
    `call #${n} (seq ${node.call.callSeq}) choice ${choice.index}`,
    `${a.kind}: matched ${a.matchedTokens} of ${a.promptTokens} prompt tokens`,
    `${choice.sampledTokens} sampled tokens, ${choice.fate}`,
  ];
  if (node.segment)
    lines.push(
      `segment ${node.segment.id} (${node.segment.kind}${node.segment.trained ? ", trained" : ", not trained"})`,
    );
  if (node.leaf) lines.push(`trajectory T${node.leaf.n}: ${node.leaf.t.trajectoryId}`);
  return lines.join("\n");
}
