// @ts-check
// The small SVG charts' parts (a 300 × 90 view box: the plot from x 24 to 296, y 10 to 80): a frame with its y
// labels, bars, lines with gaps where there is no value, time labels, and a note for an empty chart.
import { svg } from "./dom.js";

export const LEFT = 24;
export const RIGHT = 296;
const BOTTOM = 80;
const HEIGHT = 70;

/**
 * Clears `svgEl` and draws the axis from 0 to `maxY`.
 * @param {SVGSVGElement} svgEl
 * @param {number} maxY
 * @param {(v: number) => string} label
 */
export function frame(svgEl, maxY, label) {
  svgEl.replaceChildren(
    svg("line", { x1: LEFT, y1: BOTTOM, x2: RIGHT, y2: BOTTOM, stroke: "#d5d9e0" }),
    svg("text", { x: 20, y: 10, "text-anchor": "end", text: label(maxY) }),
    svg("text", { x: 20, y: 82, "text-anchor": "end", text: "0" }),
  );
}

/**
 * The y of value `v` on an axis from 0 to `maxY`.
 * @param {number} v
 * @param {number} maxY
 */
export const yOf = (v, maxY) => BOTTOM - (maxY > 0 ? (HEIGHT * Math.min(v, maxY)) / maxY : 0);

/**
 * One bar per value, left to right.
 * @param {SVGSVGElement} svgEl
 * @param {number[]} values
 * @param {(i: number) => string} colour
 * @param {number} maxY
 * @param {(i: number, v: number) => string} title
 * @param {string} [className]
 */
export function bars(svgEl, values, colour, maxY, title, className = "bar") {
  const w = (RIGHT - LEFT) / Math.max(values.length, 1);
  values.forEach((v, i) => {
    const y = yOf(v, maxY);
    const rect = svg("rect", {
      class: className,
      x: LEFT + i * w + (w > 3 ? 0.5 : 0),
      y,
      width: Math.max(0.8, w - (w > 3 ? 1 : 0)),
      height: BOTTOM - y,
      fill: colour(i),
    });
    rect.append(svg("title", { text: title(i, v) }));
    svgEl.append(rect);
  });
}

/**
 * A line through the values at evenly spaced x (bar centres), broken where a value is null.
 * @param {SVGSVGElement} svgEl
 * @param {(number | null)[]} values
 * @param {string} colour
 * @param {number} maxY
 * @param {string} [className]
 */
export function line(svgEl, values, colour, maxY, className = "series-line") {
  const w = (RIGHT - LEFT) / Math.max(values.length, 1);
  /** @type {string[][]} */
  const runs = [[]];
  values.forEach((v, i) => {
    if (v === null) runs.push([]);
    else runs.at(-1)?.push(`${(LEFT + (i + 0.5) * w).toFixed(1)},${yOf(v, maxY).toFixed(1)}`);
  });
  for (const points of runs) {
    if (points.length === 1) {
      const [x, y] = /** @type {string} */ (points[0]).split(",");
      svgEl.append(svg("circle", { class: className, cx: x, cy: y, r: 1.6, fill: colour }));
    } else if (points.length > 1)
      svgEl.append(
        svg("polyline", {
          class: className,
          points: points.join(" "),
          fill: "none",
          stroke: colour,
          "stroke-width": 1.6,
        }),
      );
  }
}

/**
 * A dashed line at a target value.
 * @param {SVGSVGElement} svgEl
 * @param {number} value
 * @param {number} maxY
 * @param {string} colour
 */
export function guide(svgEl, value, maxY, colour) {
  const y = yOf(value, maxY);
  svgEl.append(svg("line", { x1: LEFT, y1: y, x2: RIGHT, y2: y, stroke: colour, "stroke-dasharray": "3 3" }));
}

/**
 * Labels under the axis, at its two ends.
 * @param {SVGSVGElement} svgEl
 * @param {string} left
 * @param {string} right
 */
export function endLabels(svgEl, left, right) {
  svgEl.append(
    svg("text", { x: LEFT, y: 89, text: left }),
    svg("text", { x: RIGHT, y: 89, "text-anchor": "end", text: right }),
  );
}

/**
 * @param {SVGSVGElement} svgEl
 * @param {string} text
 */
export function note(svgEl, text) {
  svgEl.append(svg("text", { class: "note", x: 160, y: 48, "text-anchor": "middle", text }));
}
