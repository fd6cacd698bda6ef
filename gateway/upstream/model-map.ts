// Harnesses ask for their own model names (claude-sonnet-4-5, gpt-5-codex, …); the upstream serves one model.
// A model map rewrites the requested name before forwarding: `claude-*=Qwen/Qwen3-8B,gpt-*=Qwen/Qwen3-8B`.
// Patterns are globs (`*` any run of characters, `?` one character), tried in order; the first match wins, and a
// name no pattern matches is forwarded unchanged.

export interface ModelMapEntry {
  pattern: string;
  target: string;
}

export class ModelMap {
  readonly entries: readonly ModelMapEntry[];
  readonly #compiled: { regex: RegExp; target: string }[];

  constructor(entries: readonly ModelMapEntry[] = []) {
    this.entries = entries;
    this.#compiled = entries.map((e) => ({ regex: globToRegExp(e.pattern), target: e.target }));
  }

  /** Parses `pattern=target[,pattern=target…]` (also accepts several specs, e.g. from a repeated option). */
  static parse(specs: string | readonly string[] | undefined): ModelMap {
    const list = specs === undefined ? [] : typeof specs === "string" ? [specs] : specs;
    const entries: ModelMapEntry[] = [];
    for (const spec of list) {
      for (const part of spec.split(",")) {
        const item = part.trim();
        if (!item) continue;
        const eq = item.lastIndexOf("=");
        if (eq <= 0 || eq === item.length - 1) {
          throw new Error(
            `invalid model map entry '${item}': expected pattern=served-model, e.g. 'claude-*=Qwen/Qwen3-8B'`,
          );
        }
        entries.push({ pattern: item.slice(0, eq).trim(), target: item.slice(eq + 1).trim() });
      }
    }
    return new ModelMap(entries);
  }

  /** The served model for a requested name (unchanged when nothing matches or no name was given). */
  resolve<T extends string | null | undefined>(requested: T): T | string {
    if (typeof requested !== "string") return requested;
    for (const { regex, target } of this.#compiled) if (regex.test(requested)) return target;
    return requested;
  }
}

function globToRegExp(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replaceAll("*", ".*")
    .replaceAll("?", ".");
  return new RegExp(`^${body}$`);
}

/** The request with the model name the upstream serves, otherwise unchanged (the same object when nothing maps). */
export function withServedModel<T extends Record<string, unknown>>(map: ModelMap, request: T): T {
  const model = request["model"];
  if (typeof model !== "string") return request;
  const served = map.resolve(model);
  return served === model ? request : { ...request, model: served };
}
