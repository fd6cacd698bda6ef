// rlgate's live page: rollouts as they happen (server-sent events from /api/events), one rollout's prefix tree, its
// trajectories' tokens and a call inspector, and live charts. Plain JavaScript and SVG: nothing to build, nothing to
// download, so the gateway serves it as files.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const BREAK_KINDS = ["reserialization", "retry", "sub_agent", "compaction", "branch"];
const BREAK_TEXT = {
  reserialization: "history re-serialized (the prompt left an earlier completion)",
  retry: "retry: same prompt again, the earlier answer is a dead leaf",
  sub_agent: "sub-agent: another system prompt",
  compaction: "compaction: a new thread from a summary",
  branch: "branch: history edited",
};
// Why a break happened, where the ids tell (trajectory/types.ts BreakCause).
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
const MAX_ROWS = 500;

// ---------- state ----------
const state = {
  token: null,
  rollouts: new Map(), // id → { record, calls, summary, summaryAt, stale }
  selected: null, // rollout id
  detail: null, // reconstruction JSON of the selected rollout
  callsOf: new Map(), // rollout id → call seqs in order (for #k labels)
  selectedNode: null, // { callSeq, choiceIndex }
  trajectoryId: null,
  colour: "logprob",
  texts: new Map(), // token id → decoded text
  callTimes: [], // epoch ms of calls seen live
  overheads: [], // { at, ms }
  connected: false,
};

// ---------- small helpers ----------
const $ = (sel) => document.querySelector(sel);
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  return node;
}
function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c) node.append(c);
  return node;
}
const fmt = (v, d = 2) => (v === null || v === undefined || Number.isNaN(v) ? "—" : Number(v).toFixed(d));
const shortId = (id) => (id && id.length > 18 ? `${id.slice(0, 8)}…${id.slice(-6)}` : (id ?? "—"));
const cssVar = (name) => getComputedStyle(document.documentElement).getPropertyValue(`--${name}`).trim() || "#888";
function percentile(sorted, q) {
  if (!sorted.length) return NaN;
  const at = (q / 100) * (sorted.length - 1);
  const lo = Math.floor(at);
  const hi = Math.min(sorted.length - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo);
}

// ---------- API (the control token travels in a header, never in a URL) ----------
function headers(extra = {}) {
  return state.token ? { authorization: `Bearer ${state.token}`, ...extra } : extra;
}
class Unauthorized extends Error {}
// The API names its fields in snake_case; this page reads them in camelCase, converted once here (util/json-case.ts's
// inverse). Bodies and metadata that belong to the harness, the upstream or the user keep their keys.
const OPAQUE = new Set(["metadata", "request_received", "request_forwarded", "response", "upstream_response"]);
// Keys that are values (a segment or break kind, a status) in maps such as break counts.
const ENUM_KEYS = new Set(["sub_agent", "upstream_error", "client_aborted", "infra_error"]);
function camel(value) {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.length > 0 && typeof value[0] !== "object" ? value : value.map(camel);
  const out = {};
  for (const [key, v] of Object.entries(value)) {
    const name = ENUM_KEYS.has(key) ? key : key.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
    out[name] = OPAQUE.has(key) ? v : camel(v);
  }
  return out;
}
async function api(path, init = {}) {
  const res = await fetch(path, { ...init, headers: headers(init.headers || {}) });
  if (res.status === 401) throw new Unauthorized("the gateway needs its control token");
  const body = await res.json();
  if (!res.ok) throw new Error(body?.error?.message || `HTTP ${res.status}`);
  return camel(body);
}

function askToken(message) {
  const form = $("#token-form");
  form.hidden = false;
  $("#token-error").textContent = message || "";
  $("#token-input").focus();
}
$("#token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("#token-input").value.trim() || null;
  sessionStorage.setItem("rlgate-token", state.token || "");
  $("#token-form").hidden = true;
  start();
});

// ---------- event stream ----------
let streamAbort = null;
async function connect() {
  streamAbort?.abort();
  const abort = (streamAbort = new AbortController());
  try {
    const res = await fetch("/api/events", { headers: headers(), signal: abort.signal });
    if (res.status === 401) {
      setConnected(false, "needs token");
      askToken(state.token ? "that token was refused" : "");
      return;
    }
    if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
    setConnected(true);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        onEventBlock(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  } catch {
    if (abort.signal.aborted) return;
  }
  setConnected(false);
  // Reconnect and reload what may have been missed meanwhile.
  setTimeout(() => start(), 2000);
}

function setConnected(on, text) {
  state.connected = on;
  const conn = $("#conn");
  conn.className = `conn ${on ? "on" : "off"}`;
  conn.textContent = text || (on ? "live" : "disconnected");
}

function onEventBlock(block) {
  let event = "message";
  let data = "";
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data += line.slice(5).trim();
  }
  if (!data) return;
  const value = camel(JSON.parse(data));
  if (event === "call") onCall(value);
  else if (event === "rollout") onRollout(value);
  else if (event === "agreement" || event === "replay") globalThis.rlgateReports?.event(event, value);
}

function onCall(call) {
  state.callTimes.push(Date.now());
  if (typeof call.timings?.overheadMs === "number")
    state.overheads.push({ at: Date.now(), ms: call.timings.overheadMs });
  if (!call.rolloutId) return;
  let row = state.rollouts.get(call.rolloutId);
  if (!row) {
    // A rollout created before this page connected: fetch its record.
    row = { record: null, calls: 0, summary: null, stale: true };
    state.rollouts.set(call.rolloutId, row);
    api(`/api/rollouts/${encodeURIComponent(call.rolloutId)}`).then(
      (r) => {
        row.record = r;
        row.calls = Math.max(row.calls, r.calls);
        renderRollouts();
      },
      () => {},
    );
  }
  row.calls++;
  row.fresh = true;
  markStale(call.rolloutId);
  renderRollouts();
}

function onRollout(record) {
  const row = state.rollouts.get(record.id) || { record: null, calls: 0, summary: null };
  row.record = { ...(row.record || {}), ...record };
  row.fresh = true;
  state.rollouts.set(record.id, row);
  markStale(record.id);
  renderRollouts();
}

// ---------- rollout summaries (the reconstruction's stats), refreshed after changes, a few at a time ----------
const pending = new Set();
let refreshing = 0;
function markStale(id) {
  pending.add(id);
  setTimeout(pump, 400);
}
function pump() {
  while (refreshing < 2 && pending.size) {
    const id = pending.values().next().value;
    pending.delete(id);
    refreshing++;
    api(`/api/rollouts/${encodeURIComponent(id)}/trajectories`)
      .then(
        (rec) => {
          const row = state.rollouts.get(id);
          if (row) row.summary = { stats: rec.stats, flags: rec.flags, trajectories: rec.trajectories.length };
          if (state.selected === id) showDetail(rec);
          renderRollouts();
          renderCharts();
        },
        () => {},
      )
      .finally(() => {
        refreshing--;
        if (pending.size) setTimeout(pump, 50);
      });
  }
}

// ---------- rollouts table ----------
function rowMatches(row) {
  const r = row.record;
  if (!r) return false;
  const text = $("#filter").value.trim().toLowerCase();
  const status = $("#status-filter").value;
  if (status && r.status !== status) return false;
  if ($("#flagged-only").checked && !row.summary?.flags?.flagged) return false;
  if (!text) return true;
  return [r.id, r.group, r.harness, r.task, r.status].some((v) => v && String(v).toLowerCase().includes(text));
}
for (const id of ["#filter", "#status-filter", "#flagged-only"])
  $(id).addEventListener("input", () => renderRollouts());

let renderQueued = false;
function renderRollouts() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    const rows = [...state.rollouts.values()].filter(rowMatches);
    rows.sort((a, b) => (b.record.createdAt || 0) - (a.record.createdAt || 0));
    const body = $("#rollouts tbody");
    body.replaceChildren(
      ...rows.slice(0, MAX_ROWS).map((row) => {
        const r = row.record;
        const s = row.summary?.stats;
        const flags = row.summary?.flags;
        const breaks = s ? Object.values(s.breaks).reduce((a, b) => a + b, 0) : null;
        const tr = el(
          "tr",
          {
            "data-id": r.id,
            class: [state.selected === r.id ? "selected" : "", row.fresh ? "fresh" : ""].join(" ").trim(),
            onclick: () => select(r.id),
          },
          el("td", { class: "id", title: r.id, text: shortId(r.id) }),
          el("td", { title: r.group || "", text: r.group ?? "—" }),
          el("td", { text: r.harness ?? "—" }),
          el("td", {}, el("span", { class: `status ${r.status}`, text: r.status })),
          el("td", { class: "n", text: r.reward === null || r.reward === undefined ? "—" : fmt(r.reward, 2) }),
          el("td", { class: "n", text: String(row.calls) }),
          el("td", { class: "n", text: s ? String(row.summary.trajectories) : "…" }),
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
      }),
    );
    $("#rollouts-empty").hidden = state.rollouts.size > 0;
    const all = [...state.rollouts.values()].filter((r) => r.record);
    const open = all.filter((r) => r.record.status === "open").length;
    $("#counters").textContent = `${all.length} rollouts · ${open} open · ${callsLastSeconds(10) / 10} calls/s`;
  });
}
function breakTitle(breaks) {
  return (
    Object.entries(breaks)
      .filter(([, n]) => n)
      .map(([k, n]) => `${n} × ${k}`)
      .join(", ") || "no breaks"
  );
}

// ---------- one rollout ----------
async function select(id) {
  state.selected = id;
  state.treeShape = null;
  state.selectedNode = null;
  state.trajectoryId = null;
  renderRollouts();
  $("#detail").hidden = false;
  // The previous rollout's tree goes at once: nothing of it may be clicked while this one loads.
  $("#tree").replaceChildren();
  $("#tree-legend").replaceChildren();
  $("#detail-head").replaceChildren(el("p", { class: "empty", text: `loading ${id}…` }));
  $("#tokens-title").textContent = "tokens";
  $("#inspector-title").textContent = "call";
  $("#tokens").replaceChildren(
    el("p", { class: "empty", text: "Click a leaf of the tree (or any call) to see its trajectory's tokens." }),
  );
  $("#inspector-body").replaceChildren(el("p", { class: "empty", text: "Click a call in the tree to inspect it." }));
  try {
    showDetail(await api(`/api/rollouts/${encodeURIComponent(id)}/trajectories`));
  } catch (error) {
    $("#detail-head").replaceChildren(el("p", { class: "flag", text: `cannot load ${id}: ${error.message}` }));
  }
}

function showDetail(rec) {
  if (rec.rolloutId !== state.selected) return;
  state.detail = rec;
  const row = state.rollouts.get(rec.rolloutId);
  const r = row?.record || {};
  const s = rec.stats;
  const breaks = breakTitle(s.breaks);
  $("#detail-head").replaceChildren(
    el("h2", {}, "rollout ", el("span", { class: "id", text: rec.rolloutId })),
    el(
      "div",
      { class: "facts" },
      el("span", {}, "status ", el("b", { text: r.status ?? "—" })),
      el("span", {}, "reward ", el("b", { text: r.reward ?? "—" })),
      el("span", {}, "group ", el("b", { text: r.group ?? "—" })),
      el("span", {}, "harness ", el("b", { text: r.harness ?? "—" })),
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
  if (t) showTokens(t);
}

// ---------- the prefix tree ----------
function drawTree(rec) {
  const order = rec.calls.map((c) => c.callSeq);
  const numberOf = (seq) => order.indexOf(seq) + 1;
  const segmentOf = new Map(rec.segments.map((s) => [s.id, s]));
  const leafOf = new Map(rec.trajectories.map((t, i) => [`${t.leaf.callSeq}:${t.leaf.choiceIndex}`, { t, n: i + 1 }]));
  // Nodes: every choice of every call in the tree; calls outside it (failed, no ids) on a row of their own.
  const nodes = [];
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
      const parent = parentKey ? byKey.get(parentKey) : null;
      let lane;
      if (parent && call.attach.kind === "extend" && !continued.has(parentKey)) {
        lane = parent.lane;
        continued.add(parentKey);
      } else {
        while (lanesTaken.has(nextLane)) nextLane++;
        lane = nextLane++;
      }
      lanesTaken.add(lane);
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
  const X = (col) => 30 + col * 112;
  const Y = (lane) => 34 + (lane === -1 ? outsideRow : lane) * 62;
  const width = X(Math.max(1, rec.calls.length)) + 40;
  const height = Y(outsideRow === -1 ? lanes - 1 : outsideRow) + 46;
  const tree = $("#tree");
  tree.setAttribute("width", width);
  tree.setAttribute("height", height);
  tree.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const edges = [];
  const labels = [];
  for (const node of nodes) {
    if (!node.parent) continue;
    const kind = node.call.attach.kind;
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
    if (node.kind === "outside") {
      const g = svg(
        "g",
        {
          class: "node outside",
          "data-call": node.call.callSeq,
          transform: `translate(${x},${y})`,
          onclick: () => onNode(node),
        },
        svg("rect", {
          width: 74,
          height: 28,
          rx: 6,
          fill: "#fff",
          stroke: cssVar("branch"),
          "stroke-dasharray": "3 3",
        }),
        svg("text", { x: 37, y: 18, "text-anchor": "middle", fill: cssVar("branch"), text: `#${n} ✕` }),
        svg("text", {
          class: "under",
          x: 37,
          y: 40,
          "text-anchor": "middle",
          text: node.call.status !== "ok" ? node.call.status : node.call.tokenSource,
        }),
      );
      return g;
    }
    const dead = node.choice.fate === "dead";
    const fill = dead ? cssVar("dead") : cssVar(node.segment?.kind || "main");
    const selected = state.selectedNode && state.selectedNode.key === node.key;
    const g = svg(
      "g",
      {
        class: `node ${dead ? "dead" : ""} ${node.leaf ? "leaf" : ""} ${selected ? "selected" : ""}`,
        "data-call": node.call.callSeq,
        "data-choice": node.choice.index,
        "data-fate": node.choice.fate,
        "data-trajectory": node.leaf?.t.trajectoryId,
        transform: `translate(${x},${y})`,
        onclick: () => onNode(node),
      },
      svg("rect", {
        width: 74,
        height: 28,
        rx: 6,
        fill,
        stroke: node.leaf ? "#1d2330" : fill,
        "stroke-dasharray": dead ? "4 3" : null,
        "fill-opacity": dead ? 0.55 : 1,
      }),
      svg("text", {
        x: 37,
        y: 18,
        "text-anchor": "middle",
        text: `#${n}${node.call.choices.length > 1 ? `.${node.choice.index}` : ""}${dead ? " ✝" : ""}`,
      }),
      svg("text", {
        class: "under",
        x: 37,
        y: 40,
        "text-anchor": "middle",
        text: `${node.choice.sampledTokens} tok${dead ? " · dead" : ""}`,
      }),
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
function legendKey(colour, text) {
  const dot = el("span", { class: "dot" });
  dot.style.background = colour;
  return el("span", { class: "key" }, dot, text);
}
function nodeTitle(node, n) {
  const a = node.call.attach;
  const lines = [
    `call #${n} (seq ${node.call.callSeq}) choice ${node.choice.index}`,
    `${a.kind}: matched ${a.matchedTokens} of ${a.promptTokens} prompt tokens`,
    `${node.choice.sampledTokens} sampled tokens, ${node.choice.fate}`,
  ];
  if (node.segment)
    lines.push(
      `segment ${node.segment.id} (${node.segment.kind}${node.segment.trained ? ", trained" : ", not trained"})`,
    );
  if (node.leaf) lines.push(`trajectory T${node.leaf.n}: ${node.leaf.t.trajectoryId}`);
  return lines.join("\n");
}

function onNode(node) {
  state.selectedNode = { key: node.key, callSeq: node.call.callSeq };
  const rec = state.detail;
  // A leaf shows its own trajectory; an inner call the first trajectory its tokens lie on.
  const t = node.leaf?.t || rec.trajectories.find((x) => x.spans.some((s) => s.callSeq === node.call.callSeq)) || null;
  drawTree(rec);
  inspect(node.call.callSeq);
  if (t) showTokens(t, node.call.callSeq);
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

// ---------- tokens ----------
async function ensureTexts(ids) {
  const missing = [...new Set(ids)].filter((id) => !state.texts.has(id));
  for (let i = 0; i < missing.length; i += 50_000) {
    const chunk = missing.slice(i, i + 50_000);
    const { texts } = await api("/api/decode", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ids: chunk }),
    });
    for (const id of chunk) state.texts.set(id, texts[id] ?? "");
  }
}

function logprobColour(lp) {
  // p = exp(logprob): green when the model was sure, through yellow, to red when it sampled an unlikely token.
  const p = Math.exp(lp);
  return `hsl(${Math.round(120 * p)}, 75%, ${78 - 10 * p}%)`;
}

const CONTEXT_RUN = 160;
async function showTokens(t, focusCall) {
  state.trajectoryId = t.trajectoryId;
  const n = state.detail.trajectories.indexOf(t) + 1;
  const trained = t.lossMask.reduce((a, b) => a + b, 0);
  $("#tokens-title").textContent =
    `trajectory T${n} · ${t.segment}${t.trained ? "" : " (not trained)"} · ${t.tokenIds.length} tokens, ${trained} trained · reward ${t.reward ?? "—"}`;
  $("#tokens-title").setAttribute("data-trajectory", t.trajectoryId);
  await ensureTexts(t.tokenIds);
  if (state.trajectoryId !== t.trajectoryId) return; // another one was picked meanwhile
  const kindAt = new Array(t.tokenIds.length).fill(null);
  const callAt = new Array(t.tokenIds.length).fill(null);
  for (const span of t.spans)
    for (let i = span.start; i < span.end; i++) {
      kindAt[i] = span.kind;
      callAt[i] = span.callSeq;
    }
  const order = state.detail.calls.map((c) => c.callSeq);
  const out = [];
  let i = 0;
  while (i < t.tokenIds.length) {
    // Long runs of context are folded: the sampled spans are what a reader looks for.
    if (!kindAt[i]) {
      let j = i;
      while (j < t.tokenIds.length && !kindAt[j]) j++;
      if (j - i > CONTEXT_RUN) {
        pushTokens(out, t, i, i + 40, kindAt, callAt, order);
        const from = i + 40,
          to = j - 80;
        const gap = el("span", { class: "gap", title: "click to show", text: ` … ${to - from} context tokens … ` });
        gap.addEventListener("click", () => {
          const frag = [];
          pushTokens(frag, t, from, to, kindAt, callAt, order);
          gap.replaceWith(...frag);
        });
        out.push(gap);
        pushTokens(out, t, to, j, kindAt, callAt, order);
        i = j;
        continue;
      }
      pushTokens(out, t, i, j, kindAt, callAt, order);
      i = j;
    } else {
      let j = i;
      while (j < t.tokenIds.length && kindAt[j]) j++;
      pushTokens(out, t, i, j, kindAt, callAt, order);
      i = j;
    }
  }
  $("#tokens").replaceChildren(...out);
  renderTokenLegend();
  if (focusCall) $(`#tokens .tok[data-call="${focusCall}"]`)?.scrollIntoView({ block: "center" });
}

function pushTokens(out, t, from, to, kindAt, callAt, order) {
  for (let i = from; i < to; i++) {
    const id = t.tokenIds[i];
    const kind = kindAt[i];
    const text = state.texts.get(id) ?? "";
    const span = el("span", {
      class: `tok ${kind ? `sampled ${kind}` : "ctx"}`,
      "data-i": i,
      "data-id": id,
      "data-mask": t.lossMask[i],
    });
    if (kind) span.setAttribute("data-call", callAt[i]);
    span.textContent = text;
    const lp = t.logprobs[i];
    if (kind && state.colour === "logprob" && lp !== null) span.style.background = logprobColour(lp);
    else if (kind && state.colour === "mask")
      span.style.background = t.lossMask[i]
        ? `${cssVar("trained")}66`
        : cssVar(kind === "untrusted" ? "untrusted" : "shared");
    span.dataset.tip = [
      `${JSON.stringify(text)}  id ${id}  position ${i}`,
      kind
        ? `sampled by call #${order.indexOf(callAt[i]) + 1}: ${kind === "trained" ? "trained (mask 1)" : kind === "shared" ? "trained in another trajectory (mask 0)" : "ids not trusted (mask 0)"}`
        : "context (mask 0)",
      kind ? `logprob ${lp === null ? "—" : lp.toFixed(4)}${lp === null ? "" : `  p ${Math.exp(lp).toFixed(3)}`}` : "",
      expertsTip(t, i),
    ]
      .filter(Boolean)
      .join("\n");
    out.push(span);
  }
}

/** MoE routing replay: the experts token i was routed to, per layer (the trajectory's rows decoded once). */
function expertsTip(t, i) {
  const routing = t.routedExperts;
  if (!routing) return "";
  if (i >= t.tokenIds.length - 1) return "experts: none (the last token was never a model input)";
  if (!routing.values) {
    const bytes = Uint8Array.from(atob(routing.data), (c) => c.charCodeAt(0));
    routing.values = routing.dtype === "uint16" ? new Uint16Array(bytes.buffer) : bytes;
  }
  const width = routing.layers * routing.topK;
  const row = routing.values.subarray(i * width, (i + 1) * width);
  const layers = [];
  for (let l = 0; l < Math.min(routing.layers, 8); l++)
    layers.push(`L${l} ${Array.from(row.subarray(l * routing.topK, (l + 1) * routing.topK)).join(",")}`);
  if (routing.layers > 8) layers.push(`… ${routing.layers - 8} more layers`);
  return `experts ${layers.join(" · ")}`;
}

function renderTokenLegend() {
  const items =
    state.colour === "logprob"
      ? [
          legendKey(logprobColour(0), "p ≈ 1"),
          legendKey(logprobColour(Math.log(0.5)), "p 0.5"),
          legendKey(logprobColour(-6), "p ≈ 0"),
          el("span", { class: "key" }, "grey text: context (mask 0) · hover a token for its text, id and logprob"),
        ]
      : [
          legendKey(`${cssVar("trained")}66`, "trained here (mask 1)"),
          legendKey(cssVar("shared"), "sampled, trained in another trajectory (mask 0)"),
          legendKey(cssVar("untrusted"), "ids not trusted (mask 0)"),
          el("span", { class: "key" }, "no colour: context"),
        ];
  $("#tokens-legend").replaceChildren(...items);
}
for (const radio of document.querySelectorAll("input[name=colour]")) {
  radio.addEventListener("change", () => {
    state.colour = radio.value;
    const t = state.detail?.trajectories.find((x) => x.trajectoryId === state.trajectoryId);
    if (t) showTokens(t);
  });
}
// One tooltip element follows the pointer over tokens (thousands of title attributes render slowly).
const tip = $("#tip");
$("#tokens").addEventListener("mousemove", (event) => {
  const target = event.target.closest?.(".tok");
  if (!target) return void (tip.hidden = true);
  tip.textContent = target.dataset.tip;
  tip.hidden = false;
  tip.style.left = `${Math.min(event.clientX + 12, innerWidth - 420)}px`;
  tip.style.top = `${event.clientY + 16}px`;
});
$("#tokens").addEventListener("mouseleave", () => (tip.hidden = true));

// ---------- call inspector ----------
async function inspect(seq) {
  const id = state.selected;
  const order = state.detail.calls.map((c) => c.callSeq);
  $("#inspector-title").textContent = `call #${order.indexOf(seq) + 1}`;
  let call;
  try {
    call = await api(`/api/rollouts/${encodeURIComponent(id)}/calls/${seq}`);
    if (state.selected !== id || state.selectedNode?.callSeq !== seq) return; // another call was picked meanwhile
  } catch (error) {
    $("#inspector-body").replaceChildren(el("p", { class: "flag", text: error.message }));
    return;
  }
  const t = call.timings;
  const total = t.end - t.start;
  const phases = [
    ["rlgate before upstream", (t.upstreamStart ?? t.start) - t.start, "#8a4fd1"],
    ["upstream to first byte", (t.firstByte ?? t.end) - (t.upstreamStart ?? t.start), "#9dbcf0"],
    ["streaming", t.end - (t.firstByte ?? t.end), "#2f6fdb"],
  ];
  const bar = el("div", { class: "timeline", title: phases.map(([k, ms]) => `${k}: ${ms} ms`).join("\n") });
  for (const [, ms, colour] of phases) {
    const s = el("span");
    s.style.width = `${total > 0 ? (100 * Math.max(0, ms)) / total : 0}%`;
    s.style.background = colour;
    bar.append(s);
  }
  const warnings = [];
  if (call.status !== "ok") warnings.push(`status ${call.status}${call.error ? `: ${call.error}` : ""}`);
  if (call.tokenSource !== "upstream") warnings.push(`token ids ${call.tokenSource}: not trained`);
  if (call.tokenIssue) warnings.push(call.tokenIssue);
  // History repair: earlier assistant turns rlgate put back as the model sampled them, so the prompt re-renders them.
  for (const r of call.repairs || [])
    warnings.push(
      `history repaired: message ${r.turn} (${r.kind}) put back as call #${order.indexOf(r.callSeq) + 1} sampled it`,
    );
  for (const key of ["warnings", "fallback"])
    if (call[key] && (!Array.isArray(call[key]) || call[key].length))
      warnings.push(`${key}: ${JSON.stringify(call[key])}`);
  const added = diffKeys(call.requestReceived, call.requestForwarded);
  const sampled = call.choices.reduce((n, c) => n + c.tokenIds.length, 0);
  $("#inspector-body").replaceChildren(
    ...[
      el(
        "dl",
        {},
        el("dt", { text: "api" }),
        el("dd", { text: `${call.api} ${call.stream ? "(stream)" : ""} → HTTP ${call.httpStatus ?? "—"}` }),
        el("dt", { text: "model" }),
        el("dd", { text: call.model ?? "—" }),
        el("dt", { text: "status" }),
        el("dd", { class: call.status === "ok" ? "" : "flag", text: call.status }),
        el("dt", { text: "tokens" }),
        el("dd", { text: `${call.promptTokenIds?.length ?? 0} prompt, ${sampled} sampled (${call.tokenSource})` }),
        el("dt", { text: "finish" }),
        el("dd", { text: call.choices.map((c) => c.finishReason ?? "—").join(", ") || "—" }),
        el("dt", { text: "time" }),
        el("dd", {
          text: `${total} ms total · first token ${t.firstToken ? `${t.firstToken - t.start} ms` : "—"} · rlgate overhead ${fmt(t.overheadMs, 3)} ms`,
        }),
      ),
      bar,
      warnings.length ? el("div", { class: "warnings" }, ...warnings.map((w) => el("div", { text: `⚠ ${w}` }))) : null,
      added.length ? el("p", { class: "empty", text: `added by rlgate when forwarding: ${added.join(", ")}` }) : null,
      jsonBlock("request as received", call.requestReceived, true),
      jsonBlock("request as forwarded", call.requestForwarded, false),
      jsonBlock("response as delivered", call.response, true),
      call.upstreamResponse ? jsonBlock("upstream's response (translated call)", call.upstreamResponse, false) : null,
    ].filter(Boolean),
  );
}
function diffKeys(a, b) {
  if (!a || !b || typeof a !== "object" || typeof b !== "object") return [];
  return Object.keys(b).filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]));
}
function jsonBlock(title, value, open) {
  const text = JSON.stringify(value, null, 2) ?? "null";
  return el(
    "details",
    { open },
    el("summary", { text: `${title} · ${text.length.toLocaleString()} chars` }),
    el("pre", {
      text: text.length > 200_000 ? `${text.slice(0, 200_000)}\n… (${text.length - 200_000} more characters)` : text,
    }),
  );
}

// ---------- charts ----------
function callsLastSeconds(seconds) {
  const since = Date.now() - seconds * 1000;
  return state.callTimes.filter((t) => t >= since).length;
}
function chartFrame(svgEl, maxY, label) {
  svgEl.replaceChildren(
    svg("line", { x1: 24, y1: 80, x2: 296, y2: 80, stroke: "#d5d9e0" }),
    svg("text", { x: 20, y: 10, "text-anchor": "end", text: label(maxY) }),
    svg("text", { x: 20, y: 82, "text-anchor": "end", text: "0" }),
  );
}
function bars(svgEl, values, colours, maxY, label, title) {
  chartFrame(svgEl, maxY, label);
  const w = 272 / Math.max(values.length, 1);
  values.forEach((v, i) => {
    const h = maxY > 0 ? (70 * v) / maxY : 0;
    const rect = svg("rect", {
      x: 24 + i * w + 1,
      y: 80 - h,
      width: Math.max(1, w - 2),
      height: h,
      fill: colours[i] || cssVar("main"),
    });
    rect.append(svg("title", { text: title(i, v) }));
    svgEl.append(rect);
  });
  if (!values.length) svgEl.append(svg("text", { x: 160, y: 48, "text-anchor": "middle", text: "no data yet" }));
}
function line(svgEl, series, colour, maxY) {
  if (series.length < 2) return;
  const pts = series.map((v, i) => `${24 + (272 * i) / (series.length - 1)},${80 - (maxY > 0 ? (70 * v) / maxY : 0)}`);
  svgEl.append(svg("polyline", { points: pts.join(" "), fill: "none", stroke: colour, "stroke-width": 2 }));
}
function renderCharts() {
  const now = Date.now();
  // calls per second, last 60 s
  const buckets = new Array(60).fill(0);
  for (const t of state.callTimes) {
    const age = Math.floor((now - t) / 1000);
    if (age >= 0 && age < 60) buckets[59 - age]++;
  }
  state.callTimes = state.callTimes.filter((t) => now - t < 60_000);
  bars(
    $("#chart-calls"),
    buckets,
    [],
    Math.max(1, ...buckets),
    (v) => String(v),
    (i, v) => `${59 - i} s ago: ${v} calls`,
  );
  // overhead p50/p99 over a sliding 30 s window, sampled every 2 s for the last 2 minutes
  state.overheads = state.overheads.filter((o) => now - o.at < 150_000);
  const p50 = [],
    p99 = [];
  for (let k = 59; k >= 0; k--) {
    const end = now - k * 2000;
    const window = state.overheads
      .filter((o) => o.at <= end && o.at > end - 30_000)
      .map((o) => o.ms)
      .sort((a, b) => a - b);
    p50.push(window.length ? percentile(window, 50) : 0);
    p99.push(window.length ? percentile(window, 99) : 0);
  }
  const maxO = Math.max(0.5, ...p99);
  const oh = $("#chart-overhead");
  chartFrame(oh, maxO, (v) => v.toFixed(2));
  line(oh, p50, cssVar("main"), maxO);
  line(oh, p99, cssVar("reserialization"), maxO);
  if (!state.overheads.length) oh.append(svg("text", { x: 160, y: 48, "text-anchor": "middle", text: "no calls yet" }));
  // breaks and amplification of the latest finished rollouts
  const finished = [...state.rollouts.values()]
    .filter((r) => r.summary && r.record && r.record.status !== "open")
    .sort((a, b) => (a.record.finishedAt || 0) - (b.record.finishedAt || 0))
    .slice(-40);
  const breakCounts = finished.map((r) => Object.values(r.summary.stats.breaks).reduce((a, b) => a + b, 0));
  const dominant = finished.map((r) => {
    const [kind] = Object.entries(r.summary.stats.breaks).sort((a, b) => b[1] - a[1])[0] || [];
    return kind ? cssVar(kind) : cssVar("main");
  });
  bars(
    $("#chart-breaks"),
    breakCounts,
    dominant,
    Math.max(1, ...breakCounts),
    (v) => String(v),
    (i, v) => `${finished[i].record.id}: ${v} breaks (${breakTitle(finished[i].summary.stats.breaks)})`,
  );
  const amps = finished.map((r) => r.summary.stats.amplification || 0);
  const maxA = Math.max(1.2, ...amps);
  bars(
    $("#chart-amp"),
    amps,
    amps.map((a) => (a > 1.1 ? cssVar("reserialization") : cssVar("compaction"))),
    maxA,
    (v) => v.toFixed(1),
    (i, v) => `${finished[i].record.id}: ${v.toFixed(3)}`,
  );
  const y = 80 - (70 * 1.1) / maxA;
  $("#chart-amp").append(
    svg("line", { x1: 24, y1: y, x2: 296, y2: y, stroke: cssVar("branch"), "stroke-dasharray": "3 3" }),
  );
}

// ---------- start ----------
async function start() {
  try {
    const { rollouts } = await api("/api/rollouts?limit=200");
    for (const r of rollouts) {
      const row = state.rollouts.get(r.id) || { record: null, calls: 0, summary: null };
      row.record = r;
      row.calls = r.calls;
      state.rollouts.set(r.id, row);
    }
    for (const r of rollouts.slice(0, 60)) markStale(r.id);
    renderRollouts();
    renderCharts();
    globalThis.rlgateReports?.load();
  } catch (error) {
    if (error instanceof Unauthorized) {
      setConnected(false, "needs token");
      return askToken(state.token ? "that token was refused" : "");
    }
  }
  connect();
}

(function boot() {
  // A token handed in the URL's fragment (#token=…) is kept for this tab and removed from the address bar.
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromHash) {
    sessionStorage.setItem("rlgate-token", fromHash);
    history.replaceState(null, "", location.pathname + location.search);
  }
  state.token = sessionStorage.getItem("rlgate-token") || null;
  setInterval(() => {
    renderCharts();
    renderRollouts();
  }, 2000);
  start();
})();
