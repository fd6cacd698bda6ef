// Gemini's `parameters` are an OpenAPI 3.0 Schema object as Google writes it (`type: "OBJECT"`, `nullable`,
// `propertyOrdering`); a chat-completions upstream renders JSON Schema into the model's prompt. The same schema in
// JSON Schema's words: type names in lower case, `nullable: true` as a "null" type beside the others, Google's own
// ordering hint left out. `parametersJsonSchema` is JSON Schema already and goes as it is; response schemas are read
// this way whichever field holds them (request.ts).
import { isObject, type Json } from "../../upstream/fields.ts";

/** Nested schemas deeper than this are not rewritten (the request body's depth is bounded before; this bounds work). */
const MAX_DEPTH = 64;

/** Keywords whose values are data, not schemas: kept as they are. */
const VALUES = new Set(["enum", "required", "example", "examples", "default", "const"]);

function typeName(value: unknown): unknown {
  return typeof value === "string" ? value.toLowerCase() : value;
}

export function jsonSchemaOf(schema: unknown, depth = 0): unknown {
  if (Array.isArray(schema)) return schema.map((item) => jsonSchemaOf(item, depth + 1));
  if (!isObject(schema) || depth > MAX_DEPTH) return schema;
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === "propertyOrdering" || key === "nullable") continue;
    if (key === "type") out[key] = Array.isArray(value) ? value.map(typeName) : typeName(value);
    else if (key === "properties" && isObject(value))
      out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, jsonSchemaOf(sub, depth + 1)]));
    else if (VALUES.has(key)) out[key] = value;
    else out[key] = isObject(value) || Array.isArray(value) ? jsonSchemaOf(value, depth + 1) : value;
  }
  if (schema["nullable"] === true && typeof out["type"] === "string") out["type"] = [out["type"], "null"];
  return out;
}
