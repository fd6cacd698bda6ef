// JSON as Python's `json.dumps(value, ensure_ascii=False)` writes it (", " and ": " separators). This is what Qwen3's
// chat template (`tojson`) puts in a prompt and what vLLM's hermes parser returns as a tool call's `arguments`.
export function pyJson(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number")
    return Number.isFinite(value) ? pyNumber(value) : value > 0 ? "Infinity" : value < 0 ? "-Infinity" : "NaN";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (Array.isArray(value)) return `[${value.map(pyJson).join(", ")}]`;
  if (typeof value === "object") {
    const parts: string[] = [];
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      if (item === undefined) continue;
      parts.push(`${JSON.stringify(key)}: ${pyJson(item)}`);
    }
    return `{${parts.join(", ")}}`;
  }
  return JSON.stringify(String(value));
}

// Python writes small and large floats with a two-digit exponent ("1e-07", "1e+21"); JSON.parse cannot tell 1 from 1.0,
// so integral values are written as integers.
function pyNumber(n: number): string {
  const s = String(n);
  const m = /^(-?[\d.]+)e([+-])(\d)$/.exec(s);
  return m ? `${m[1]}e${m[2]}0${m[3]}` : s;
}

/** Python's plain `json.dumps(value)`: as pyJson, with every non-ASCII UTF-16 unit written as a lowercase \u escape. */
export function pyJsonAscii(value: unknown): string {
  return pyJson(value).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
