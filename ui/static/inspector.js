// @ts-check
// The call inspector: one call's API, model, status, token counts, finish reasons, timings (with a bar of where the
// time went), warnings, the fields rlgate added when forwarding, and its bodies as received, forwarded and delivered.
import { api } from "./api.js";
import { $, el, fmt } from "./dom.js";
import { state } from "./state.js";

/**
 * Shows call `seq` of the selected rollout.
 * @param {number} seq
 */
export async function inspect(seq) {
  const id = state.selected;
  if (!id || !state.detail) return;
  const order = state.detail.calls.map((c) => c.callSeq);
  $("#inspector-title").textContent = `call #${order.indexOf(seq) + 1}`;
  /** @type {any} */
  let call;
  try {
    call = await api(`/api/rollouts/${encodeURIComponent(id)}/calls/${seq}`);
    if (state.selected !== id || state.selectedNode?.callSeq !== seq) return; // another call was picked meanwhile
  } catch (error) {
    $("#inspector-body").replaceChildren(el("p", { class: "flag", text: /** @type {Error} */ (error).message }));
    return;
  }
  const t = call.timings;
  const total = t.end - t.start;
  /** @type {[string, number, string][]} */
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
  const sampled = call.choices.reduce(
    /** @param {number} n @param {{ tokenIds: number[] }} c */ (n, c) => n + c.tokenIds.length,
    0,
  );
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
        el("dd", {
          text:
            call.choices.map(/** @param {{ finishReason?: string }} c */ (c) => c.finishReason ?? "—").join(", ") ||
            "—",
        }),
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
    ].filter((node) => node !== null),
  );
}
/**
 * The top-level fields that differ between two request bodies.
 * @param {any} a
 * @param {any} b
 * @returns {string[]}
 */
function diffKeys(a, b) {
  if (!a || !b || typeof a !== "object" || typeof b !== "object") return [];
  return Object.keys(b).filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]));
}
/**
 * @param {string} title
 * @param {unknown} value
 * @param {boolean} open
 */
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
