// @ts-check
// Building the page's elements: HTML and SVG nodes from attributes and children, the colours the stylesheet names,
// and number and id formats shared by the panels.

const SVG_NS = "http://www.w3.org/2000/svg";

/** @typedef {string | number | boolean | null | undefined | ((event: any) => void)} AttrValue */
/** @typedef {Node | string | number | null | undefined | false} Child */

/**
 * The one element `selector` names; the page is built with it, so a missing one is a bug of the page.
 * @param {string} selector
 * @returns {HTMLElement}
 */
export function $(selector) {
  const node = document.querySelector(selector);
  if (!(node instanceof HTMLElement)) throw new Error(`the page has no ${selector}`);
  return node;
}

/**
 * An input, select or button by selector (typed for its value).
 * @param {string} selector
 * @returns {HTMLInputElement}
 */
export const input = (selector) => /** @type {HTMLInputElement} */ ($(selector));

/**
 * An SVG element by selector.
 * @param {string} selector
 * @returns {SVGSVGElement}
 */
export function svgOf(selector) {
  const node = document.querySelector(selector);
  if (!(node instanceof SVGSVGElement)) throw new Error(`the page has no svg ${selector}`);
  return node;
}

/**
 * @param {Element} node
 * @param {Record<string, AttrValue>} attrs
 * @param {boolean} html
 */
function setAttributes(node, attrs, html) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (html && k === "class") node.className = String(v);
    else if (k === "text") node.textContent = String(v);
    else if (typeof v === "function") node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
}

/**
 * @param {Element} node
 * @param {Child[]} children
 */
function append(node, children) {
  for (const c of children.flat())
    if (c !== null && c !== undefined && c !== false) node.append(c instanceof Node ? c : String(c));
}

/**
 * An HTML element: `class`, `text`, `on<event>` handlers and plain attributes.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, AttrValue>} [attrs]
 * @param {Child[]} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttributes(node, attrs, true);
  append(node, children);
  return node;
}

/**
 * An SVG element, attributes as `el`'s.
 * @param {string} tag
 * @param {Record<string, AttrValue>} [attrs]
 * @param {Child[]} children
 * @returns {SVGElement}
 */
export function svg(tag, attrs = {}, ...children) {
  const node = /** @type {SVGElement} */ (document.createElementNS(SVG_NS, tag));
  setAttributes(node, attrs, false);
  append(node, children);
  return node;
}

/**
 * A colour the stylesheet names (`--main`, `--reserialization`, …).
 * @param {string} name
 */
export const cssVar = (name) =>
  getComputedStyle(document.documentElement).getPropertyValue(`--${name}`).trim() || "#888";

/**
 * @param {number | null | undefined} v
 * @param {number} [digits]
 */
export const fmt = (v, digits = 2) =>
  v === null || v === undefined || Number.isNaN(v) ? "—" : Number(v).toFixed(digits);

/** @param {string | null | undefined} id */
export const shortId = (id) => (id && id.length > 18 ? `${id.slice(0, 8)}…${id.slice(-6)}` : (id ?? "—"));

/** @param {number} ms epoch ms */
export const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour12: false });

/**
 * A coloured dot and its text, for legends.
 * @param {string} colour
 * @param {string} text
 */
export function legendKey(colour, text) {
  const dot = el("span", { class: "dot" });
  dot.style.background = colour;
  return el("span", { class: "key" }, dot, text);
}

/**
 * "3 × reserialization, 1 × retry", or "no breaks".
 * @param {Record<string, number>} breaks
 */
export function breakTitle(breaks) {
  return (
    Object.entries(breaks)
      .filter(([, n]) => n)
      .map(([k, n]) => `${n} × ${k}`)
      .join(", ") || "no breaks"
  );
}

/** @param {Record<string, number>} breaks */
export const breakCount = (breaks) => Object.values(breaks).reduce((a, b) => a + b, 0);
