// Plain-text tables for summaries: columns padded to their widest cell, numbers right-aligned.

export type Cell = string | number | null | undefined;

/** A number in a table: fixed decimals, "—" for missing or NaN. */
export function num(value: number | null | undefined, digits = 4): string {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  if (!Number.isFinite(value)) return String(value);
  return value.toFixed(digits);
}

export function table(header: readonly string[], rows: ReadonlyArray<readonly Cell[]>): string {
  const text = rows.map((row) => row.map((cell) => (cell === null || cell === undefined ? "—" : String(cell))));
  const numeric = header.map((_, c) => text.every((row) => /^-?[\d.,]+%?$|^—$/.test(row[c] ?? "")));
  const widths = header.map((h, c) => Math.max(h.length, ...text.map((row) => (row[c] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, c) => (numeric[c] ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)))
      .join("  ")
      .trimEnd();
  return [line(header), line(widths.map((w) => "─".repeat(w))), ...text.map(line)].join("\n");
}
