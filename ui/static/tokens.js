// @ts-check
// A trajectory's tokens as text: sampled tokens coloured by logprob (or by loss mask), context grey with long runs
// folded, one tooltip that follows the pointer with each token's text, id, position, call, mask, logprob and routed
// experts. Texts come from /api/decode, once per token id.
import { api } from "./api.js";
import { $, cssVar, el, legendKey } from "./dom.js";
import { state } from "./state.js";

/** @typedef {import("./types.js").Trajectory} Trajectory */

// ---------- tokens ----------
/**
 * Decodes the ids this page has no text of yet.
 * @param {number[]} ids
 */
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

/** @param {number} lp */
function logprobColour(lp) {
  // p = exp(logprob): green when the model was sure, through yellow, to red when it sampled an unlikely token.
  const p = Math.exp(lp);
  return `hsl(${Math.round(120 * p)}, 75%, ${78 - 10 * p}%)`;
}

const CONTEXT_RUN = 160;

/**
 * Shows trajectory `t`'s tokens, scrolled to the tokens of call `focusCall` when given.
 * @param {Trajectory} t
 * @param {number} [focusCall]
 */
export async function showTokens(t, focusCall) {
  const detail = state.detail;
  if (!detail) return;
  state.trajectoryId = t.trajectoryId;
  const n = detail.trajectories.indexOf(t) + 1;
  const trained = t.lossMask.reduce((a, b) => a + b, 0);
  $("#tokens-title").textContent =
    `trajectory T${n} · ${t.segment}${t.trained ? "" : " (not trained)"} · ${t.tokenIds.length} tokens, ${trained} trained · reward ${t.reward ?? "—"}`;
  $("#tokens-title").setAttribute("data-trajectory", t.trajectoryId);
  await ensureTexts(t.tokenIds);
  if (state.trajectoryId !== t.trajectoryId) return; // another one was picked meanwhile
  /** @type {(string | null)[]} */
  const kindAt = new Array(t.tokenIds.length).fill(null);
  /** @type {(number | null)[]} */
  const callAt = new Array(t.tokenIds.length).fill(null);
  for (const span of t.spans)
    for (let i = span.start; i < span.end; i++) {
      kindAt[i] = span.kind;
      callAt[i] = span.callSeq;
    }
  const order = detail.calls.map((c) => c.callSeq);
  /** @type {HTMLElement[]} */
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
          /** @type {HTMLElement[]} */
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

/**
 * Appends the spans of tokens `from`…`to` of `t` to `out`.
 * @param {HTMLElement[]} out
 * @param {Trajectory} t
 * @param {number} from
 * @param {number} to
 * @param {(string | null)[]} kindAt
 * @param {(number | null)[]} callAt
 * @param {number[]} order
 */
function pushTokens(out, t, from, to, kindAt, callAt, order) {
  for (let i = from; i < to; i++) {
    const id = /** @type {number} */ (t.tokenIds[i]);
    const kind = kindAt[i];
    const text = state.texts.get(id) ?? "";
    const span = el("span", {
      class: `tok ${kind ? `sampled ${kind}` : "ctx"}`,
      "data-i": i,
      "data-id": id,
      "data-mask": t.lossMask[i],
    });
    if (kind) span.setAttribute("data-call", String(callAt[i]));
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
        ? `sampled by call #${order.indexOf(/** @type {number} */ (callAt[i])) + 1}: ${kind === "trained" ? "trained (mask 1)" : kind === "shared" ? "trained in another trajectory (mask 0)" : "ids not trusted (mask 0)"}`
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
/**
 * @param {Trajectory} t
 * @param {number} i
 */
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

export function renderTokenLegend() {
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
/** The colour toggle and the tooltip that follows the pointer over tokens. */
export function wireTokenView() {
  for (const radio of document.querySelectorAll("input[name=colour]")) {
    const choice = /** @type {HTMLInputElement} */ (radio);
    choice.addEventListener("change", () => {
      state.colour = choice.value;
      const t = state.detail?.trajectories.find((x) => x.trajectoryId === state.trajectoryId);
      if (t) void showTokens(t);
    });
  }
  // One tooltip element follows the pointer (thousands of title attributes render slowly).
  const tip = $("#tip");
  $("#tokens").addEventListener("mousemove", (event) => {
    const target = event.target instanceof Element ? event.target.closest(".tok") : null;
    if (!(target instanceof HTMLElement)) return void (tip.hidden = true);
    tip.textContent = target.dataset.tip ?? "";
    tip.hidden = false;
    tip.style.left = `${Math.min(event.clientX + 12, innerWidth - 420)}px`;
    tip.style.top = `${event.clientY + 16}px`;
  });
  $("#tokens").addEventListener("mouseleave", () => (tip.hidden = true));
}
