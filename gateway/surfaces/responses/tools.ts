// The tools of a Responses request as the chat-completions functions the upstream's model can call, and the way back.
// Codex sends more than function tools:
//   namespace {name, tools:[function…]}  → one function per member, named `{namespace}__{name}`; the model's call
//                                           becomes a function_call item with `name` and `namespace` again
//   custom {name, format}  (freeform, e.g. apply_patch) → a function taking `{"input": string}`; the call becomes a
//                                           custom_tool_call item whose `input` is that string
//   local_shell                           → a function `local_shell` taking `{command: string[], workdir, timeout_ms}`;
//                                           the call becomes a local_shell_call item with an exec action
//   hosted tools (web_search, file_search, image_generation, code_interpreter, computer_use, mcp, tool_search, …)
//                                         → dropped from the upstream request, with a warning on the call: the upstream
//                                           cannot run them and a model told about them would call them in vain
// The same mapping turns the harness's input items (function_call with a namespace, custom_tool_call, local_shell_call)
// back into the tool calls the model sampled, so the next prompt holds the model's own output.
import { GatewayError } from "../../errors.ts";
import { isObject, shown, textField, type Json } from "../../upstream/fields.ts";

export type ToolKind = "function" | "custom" | "local_shell";

export interface MappedTool {
  kind: ToolKind;
  /** The tool's name in the harness's API (within its namespace, for namespace members). */
  name: string;
  namespace: string | null;
}

const NAMESPACE_SEPARATOR = "__";
const LOCAL_SHELL = "local_shell";

const LOCAL_SHELL_PARAMETERS: Json = {
  type: "object",
  properties: {
    command: {
      type: "array",
      items: { type: "string" },
      description: 'The command and its arguments, e.g. ["bash", "-lc", "ls"].',
    },
    workdir: { type: "string", description: "Working directory." },
    timeout_ms: { type: "integer", description: "Time limit in milliseconds." },
  },
  required: ["command"],
};

function customParameters(tool: Json): Json {
  const format = isObject(tool["format"]) ? tool["format"] : null;
  const grammar =
    format && format["type"] === "grammar" && typeof format["definition"] === "string"
      ? ` It follows this ${shown(format["syntax"] ?? "")} grammar:\n${format["definition"]}`
      : "";
  return {
    type: "object",
    properties: { input: { type: "string", description: `The tool's whole input, as free text.${grammar}` } },
    required: ["input"],
  };
}

function invalid(param: string, message: string): GatewayError {
  return new GatewayError("RLGATE_BAD_REQUEST", `invalid request: ${param}: ${message}`, { param });
}

/** The chat-completions function names of one request's tools, and what each maps back to. */
export class ResponsesToolMap {
  readonly #byFunction = new Map<string, MappedTool>();
  readonly #byOriginal = new Map<string, string>();

  static empty(): ResponsesToolMap {
    return new ResponsesToolMap();
  }

  /** The function name for a harness-side tool; unknown tools keep their name (a history from other tools). */
  functionName(name: string, namespace: string | null = null): string {
    return (
      this.#byOriginal.get(key(name, namespace)) ?? (namespace ? `${namespace}${NAMESPACE_SEPARATOR}${name}` : name)
    );
  }

  /** What a function the model called maps back to; a plain function when it is not one of the request's tools. */
  lookup(functionName: string): MappedTool {
    return this.#byFunction.get(functionName) ?? { kind: "function", name: functionName, namespace: null };
  }

  add(fn: string, tool: MappedTool): string {
    let name = fn;
    for (let k = 2; this.#byFunction.has(name); k++) name = `${fn}_${k}`;
    this.#byFunction.set(name, tool);
    this.#byOriginal.set(key(tool.name, tool.namespace), name);
    return name;
  }
}

function key(name: string, namespace: string | null): string {
  return namespace === null ? name : `${namespace}\u0000${name}`;
}

function chatFunction(name: string, tool: Json, parameters: unknown): Json {
  const fn: Json = { name, parameters: parameters ?? { type: "object", properties: {} } };
  if (typeof tool["description"] === "string") fn["description"] = tool["description"];
  if (typeof tool["strict"] === "boolean") fn["strict"] = tool["strict"];
  return { type: "function", function: fn };
}

/** The chat tools for a Responses request's tools, their map back, and a warning per tool that was dropped. */
export function chatTools(tools: unknown, warnings: string[]): { tools: Json[] | undefined; map: ResponsesToolMap } {
  const map = new ResponsesToolMap();
  if (tools == null) return { tools: undefined, map };
  if (!Array.isArray(tools)) throw invalid("tools", "expected an array of tools");
  const out: Json[] = [];
  tools.forEach((tool, k) => {
    if (!isObject(tool)) throw invalid(`tools.${k}`, "each tool must be an object");
    if (typeof tool["type"] !== "string")
      throw invalid(`tools.${k}.type`, `expected a string, got ${shown(tool["type"])}`);
    const type = tool["type"];
    switch (type) {
      case "function": {
        if (typeof tool["name"] !== "string") throw invalid(`tools.${k}.name`, "function tools need a name");
        out.push(
          chatFunction(
            map.add(tool["name"], { kind: "function", name: tool["name"], namespace: null }),
            tool,
            tool["parameters"],
          ),
        );
        return;
      }
      case "namespace": {
        const namespace = tool["name"];
        if (typeof namespace !== "string" || !Array.isArray(tool["tools"]))
          throw invalid(`tools.${k}`, "namespace tools need a name and tools");
        (tool["tools"] as unknown[]).forEach((member, j) => {
          if (!isObject(member) || member["type"] !== "function" || typeof member["name"] !== "string") {
            warnings.push(`tools.${k}.tools.${j}: a namespace member that is not a function tool was dropped`);
            return;
          }
          const fn = map.add(`${namespace}${NAMESPACE_SEPARATOR}${member["name"]}`, {
            kind: "function",
            name: member["name"],
            namespace,
          });
          out.push(chatFunction(fn, member, member["parameters"]));
        });
        return;
      }
      case "custom": {
        if (typeof tool["name"] !== "string") throw invalid(`tools.${k}.name`, "custom tools need a name");
        out.push(
          chatFunction(
            map.add(tool["name"], { kind: "custom", name: tool["name"], namespace: null }),
            tool,
            customParameters(tool),
          ),
        );
        return;
      }
      case "local_shell":
        out.push(
          chatFunction(
            map.add(LOCAL_SHELL, { kind: "local_shell", name: LOCAL_SHELL, namespace: null }),
            { description: "Runs a command on the local machine and returns its output." },
            LOCAL_SHELL_PARAMETERS,
          ),
        );
        return;
      default:
        warnings.push(`tools.${k}: hosted tool '${type}' dropped: a chat-completions upstream cannot run it`);
    }
  });
  return { tools: out, map };
}

/** The chat tool call for a function_call, custom_tool_call or local_shell_call input item. */
export function toolCallOf(item: Json, map: ResponsesToolMap, at: string): Json {
  const id = textField(item["call_id"] ?? item["id"], `${at}.call_id`);
  const call = (name: string, args: string): Json => ({ id, type: "function", function: { name, arguments: args } });
  switch (item["type"]) {
    case "custom_tool_call":
      return call(
        map.functionName(textField(item["name"], `${at}.name`)),
        JSON.stringify({ input: textField(item["input"], `${at}.input`) }),
      );
    case "local_shell_call": {
      const action = isObject(item["action"]) ? item["action"] : {};
      const args: Json = { command: Array.isArray(action["command"]) ? action["command"] : [] };
      if (typeof action["working_directory"] === "string") args["workdir"] = action["working_directory"];
      if (typeof action["timeout_ms"] === "number") args["timeout_ms"] = action["timeout_ms"];
      return call(map.functionName(LOCAL_SHELL), JSON.stringify(args));
    }
    default: {
      const namespace = typeof item["namespace"] === "string" ? item["namespace"] : null;
      return call(
        map.functionName(textField(item["name"], `${at}.name`), namespace),
        typeof item["arguments"] === "string" ? item["arguments"] : "{}",
      );
    }
  }
}

/** The parsed arguments of a call, or null when they are not a JSON object. */
function argumentsObject(text: string): Json | null {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : null;
  } catch {
    return null;
  }
}

/**
 * The output item for a tool call the model made, once its arguments are complete: a function_call (with its
 * namespace), a custom_tool_call (the `input` argument as its text; the raw arguments when the model wrote no such
 * object) or a local_shell_call.
 */
export function outputItemOf(
  base: { id: string; call_id: string; status: string },
  functionName: string,
  args: string,
  map: ResponsesToolMap,
): Json {
  const tool = map.lookup(functionName);
  if (tool.kind === "custom") {
    const parsed = argumentsObject(args);
    const input = parsed && typeof parsed["input"] === "string" ? parsed["input"] : args;
    return {
      id: base.id.replace(/^fc_/, "ctc_"),
      type: "custom_tool_call",
      status: base.status,
      call_id: base.call_id,
      name: tool.name,
      input,
    };
  }
  if (tool.kind === "local_shell") {
    const parsed = argumentsObject(args) ?? {};
    const command = Array.isArray(parsed["command"])
      ? parsed["command"].map(String)
      : typeof parsed["command"] === "string"
        ? ["bash", "-lc", parsed["command"]]
        : [];
    const action: Json = {
      type: "exec",
      command,
      timeout_ms: typeof parsed["timeout_ms"] === "number" ? parsed["timeout_ms"] : null,
      working_directory: typeof parsed["workdir"] === "string" ? parsed["workdir"] : null,
      env: null,
      user: null,
    };
    return {
      id: base.id.replace(/^fc_/, "lsh_"),
      type: "local_shell_call",
      status: base.status,
      call_id: base.call_id,
      action,
    };
  }
  const item: Json = {
    id: base.id,
    type: "function_call",
    status: base.status,
    arguments: args,
    call_id: base.call_id,
    name: tool.name,
  };
  if (tool.namespace !== null) item["namespace"] = tool.namespace;
  return item;
}
