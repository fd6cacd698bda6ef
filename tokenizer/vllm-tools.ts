// The tools of a chat request as vLLM hands them to the chat template. Its request model parses each tool as
// `ChatCompletionToolsParam {type = "function", function: FunctionDefinition {name, description = None,
// parameters = None}}` (extra fields allowed) and the chat route passes `tool.model_dump()`: the declared fields first,
// in the order the model declares them, an absent optional one as None, then the extra fields in the order sent.
// A template that prints a tool whole (Qwen3's and Llama's `tojson`) therefore writes `{"type": …, "function":
// {"name": …, "description": …, "parameters": …}}` whatever order the harness used, and `"description": null` for a
// tool that has none.
type Dict = Record<string, unknown>;

function isDict(value: unknown): value is Dict {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** Declared fields first (absent ones as null), then the rest in the order given. */
function dumped(value: Dict, declared: Readonly<Dict>): Dict {
  const out: Dict = {};
  for (const [key, fallback] of Object.entries(declared)) out[key] = key in value ? value[key] : fallback;
  for (const [key, field] of Object.entries(value)) if (!(key in declared)) out[key] = field;
  return out;
}

/** One tool as vLLM dumps it; what its model would refuse (no function object) is left as it is. */
export function vllmTool(tool: unknown): unknown {
  if (!isDict(tool) || !isDict(tool["function"])) return tool;
  const fn = dumped(tool["function"], { name: undefined, description: null, parameters: null });
  return dumped({ ...tool, function: fn }, { type: "function", function: undefined });
}

export function vllmTools(tools: readonly unknown[]): unknown[] {
  return tools.map(vllmTool);
}
