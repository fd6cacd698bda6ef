// The tool names a harness offered in a captured request, whatever its API: chat completions
// (`tools[].function.name`), Responses and Messages (`tools[].name`), Gemini (`tools[].functionDeclarations[].name`).
// `rlgate harness-check` names them when the scripted shell tool is not among them.
export function offeredTools(request: unknown): string[] {
  const tools = (request as { tools?: unknown })?.tools;
  if (!Array.isArray(tools)) return [];
  return tools.flatMap((t: any): string[] => {
    if (typeof t?.function?.name === "string") return [t.function.name];
    if (typeof t?.name === "string") return [t.name];
    if (Array.isArray(t?.functionDeclarations))
      return t.functionDeclarations.map((d: any) => d?.name).filter((n: unknown) => typeof n === "string");
    return [];
  });
}
